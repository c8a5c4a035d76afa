#include "alerting/notifiers/mailnotifier.h"

#include "partners/profiles/smtpprofile.h"
#include "partners/smtpsender.h"

#include <QDateTime>
#include <QPointer>
#include <QRandomGenerator>
#include <QThreadPool>
#include <QTimeZone>
#include <QUrlQuery>

#include <atomic>

namespace once {

namespace {

constexpr int MailTimeoutMs = 20000;

class MailNotifier final : public Notifier
{
public:
    MailNotifier(const QUrl &url, SmtpTransaction transaction, QString from, QString to)
        : Notifier(url), m_transaction(std::move(transaction)), m_from(std::move(from)), m_to(std::move(to))
    {
        m_pool.setMaxThreadCount(1);
        m_pool.setObjectName(QStringLiteral("once-watch-smtp"));
    }

    ~MailNotifier() override
    {
        m_stopping->store(true);
        m_pool.clear();
        m_pool.waitForDone();
    }

    void send(const Notification &notification, Done done) override
    {
        SmtpTransaction transaction = m_transaction;
        const QByteArray messageId = "<once.watch." +
                                     QByteArray::number(QRandomGenerator::global()->generate64(), 16) +
                                     "@once.invalid>";
        const qint64 nowMs = QDateTime::currentMSecsSinceEpoch();
        transaction.mail = composeSmtpMail(m_from, m_to, notification.subject(), notification.text(nowMs),
                                           messageId, QDateTime::fromMSecsSinceEpoch(nowMs, QTimeZone::utc()),
                                           {"X-Once-Incident: " + notification.key().toLatin1()});
        m_pool.start([transaction = std::move(transaction), stopping = m_stopping,
                      self = QPointer<MailNotifier>(this), done = std::move(done)]() mutable {
            const SmtpAttempt attempt = runSmtpTransaction(transaction, stopping);
            QString error;
            if (attempt.failure != SmtpAttempt::Failure::None) {
                // The server's reply and curl's words: neither holds the password (AUTH is
                // never traced, see smtpsender.cpp).
                error = attempt.replyCode
                            ? QStringLiteral("SMTP %1 %2").arg(attempt.replyCode).arg(attempt.reply)
                            : attempt.error;
            }
            if (!self)
                return;
            QMetaObject::invokeMethod(
                self.data(),
                [done = std::move(done), delivered = attempt.failure == SmtpAttempt::Failure::None, error] {
                    done(delivered, error.simplified().left(300));
                },
                Qt::QueuedConnection);
        });
    }

private:
    SmtpTransaction m_transaction;
    QString m_from;
    QString m_to;
    std::shared_ptr<std::atomic_bool> m_stopping = std::make_shared<std::atomic_bool>(false);
    QThreadPool m_pool;
};

} // namespace

std::unique_ptr<Notifier> createMailNotifier(const QUrl &url, QString *error)
{
    const QUrlQuery query(url);
    const QString from = query.queryItemValue(QStringLiteral("from"), QUrl::FullyDecoded);
    const QString to = query.queryItemValue(QStringLiteral("to"), QUrl::FullyDecoded);
    const QString name = notifierName(url);
    if (to.isEmpty() || from.isEmpty()) {
        *error = QStringLiteral("--notify %1: a mail needs ?from=ADDRESS&to=ADDRESS").arg(name);
        return nullptr;
    }
    for (const auto &[field, address] :
         {std::pair{QStringLiteral("from"), from}, std::pair{QStringLiteral("to"), to}}) {
        if (const QString why = smtpAddressProblem(address); !why.isEmpty()) {
            *error = QStringLiteral("--notify %1: %2 %3").arg(name, field, why);
            return nullptr;
        }
    }
    const QString starttls = query.queryItemValue(QStringLiteral("starttls"));
    if (!starttls.isEmpty() && starttls != QLatin1String("required")) {
        *error = QStringLiteral("--notify %1: starttls can only be \"required\"").arg(name);
        return nullptr;
    }
    QUrl server = url;
    server.setUserInfo(QString());
    server.setQuery(QString());
    server.setPath(QString());
    server.setScheme(url.scheme().toLower());
    SmtpTransaction transaction;
    transaction.url = server.toEncoded();
    transaction.user = url.userName(QUrl::FullyDecoded).toUtf8();
    transaction.password = url.password(QUrl::FullyDecoded).toUtf8();
    transaction.starttlsRequired = starttls == QLatin1String("required");
    transaction.timeoutMs = MailTimeoutMs;
    return std::make_unique<MailNotifier>(url, std::move(transaction), from, to);
}

} // namespace once
