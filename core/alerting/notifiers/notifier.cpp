#include "alerting/notifiers/notifier.h"

#include "alerting/notifiers/mailnotifier.h"
#include "alerting/notifiers/slacknotifier.h"
#include "alerting/notifiers/webhooknotifier.h"
#include "partners/partnersettings.h"

#include <QDateTime>

namespace once {

Q_LOGGING_CATEGORY(lcWatch, "once.watch")

Notifier::Notifier(const QUrl &url, QObject *parent) : QObject(parent), m_name(notifierName(url)) {}

QString notifierName(const QUrl &url)
{
    QString name = url.scheme() + QStringLiteral("://") + url.host(QUrl::FullyEncoded);
    if (url.port() > 0)
        name += QLatin1Char(':') + QString::number(url.port());
    return name;
}

std::unique_ptr<Notifier> createNotifier(const QString &value, QString *error)
{
    QString text = value.trimmed();
    if (text.startsWith(QLatin1String("env:")) || text.startsWith(QLatin1String("file:"))) {
        QString secretError;
        const auto resolved = resolveSecretReference(text, &secretError);
        if (!resolved) {
            *error = QStringLiteral("--notify %1: %2").arg(text, secretError);
            return nullptr;
        }
        text = QString::fromUtf8(resolved->trimmed());
    }
    const QUrl url(text, QUrl::StrictMode);
    const QString scheme = url.scheme().toLower();
    // Only the scheme and the host ever reach an error: the rest may be a token.
    if (!url.isValid() || scheme.isEmpty() || url.host().isEmpty()) {
        *error = QStringLiteral(
            "--notify: not a URL with a host (http://, https://, slack+https://, smtp://, smtps://)");
        return nullptr;
    }
    if (scheme == QLatin1String("http") || scheme == QLatin1String("https"))
        return std::make_unique<WebhookNotifier>(url);
    if (scheme == QLatin1String("slack+https") || scheme == QLatin1String("slack+http"))
        return createSlackNotifier(url, error);
    if (scheme == QLatin1String("smtp") || scheme == QLatin1String("smtps"))
        return createMailNotifier(url, error);
    *error = QStringLiteral("--notify %1://...: unknown scheme (http, https, slack+https, smtp or smtps)")
                 .arg(scheme);
    return nullptr;
}

NotifierQueue::NotifierQueue(std::unique_ptr<Notifier> notifier, const QString &label, qint64 retryBaseMs,
                             qint64 retryCapMs, QObject *parent)
    : QObject(parent), m_notifier(std::move(notifier)),
      m_name(QStringLiteral("%1 (%2)").arg(label, m_notifier->name())), m_retryBaseMs(retryBaseMs),
      m_retryCapMs(retryCapMs)
{
    m_notifier->setParent(nullptr);
    m_retry.setSingleShot(true);
    connect(&m_retry, &QTimer::timeout, this, &NotifierQueue::sendNext);
}

NotifierQueue::~NotifierQueue() = default;

void NotifierQueue::enqueue(const Notification &notification)
{
    m_pending.append(notification);
    if (!m_sending && !m_retry.isActive())
        QMetaObject::invokeMethod(this, &NotifierQueue::sendNext, Qt::QueuedConnection);
}

void NotifierQueue::drop(const std::function<bool(const Notification &)> &keep)
{
    // The head is on the wire while m_sending: it stays, its answer is awaited.
    const qsizetype from = m_sending ? 1 : 0;
    for (qsizetype i = m_pending.size() - 1; i >= from; --i) {
        if (!keep(m_pending.at(i)))
            m_pending.removeAt(i);
    }
    if (m_pending.isEmpty()) {
        m_retry.stop();
        m_failures = 0;
    }
}

void NotifierQueue::sendNext()
{
    if (m_sending || m_pending.isEmpty())
        return;
    m_sending = true;
    const Notification notification = m_pending.constFirst();
    m_notifier->send(notification, [this, notification](bool sent, const QString &error) {
        m_sending = false;
        if (sent) {
            if (m_failures)
                qCInfo(lcWatch).noquote() << QStringLiteral("%1: %2 sent after %3 failed tries")
                                                 .arg(name(), notification.key())
                                                 .arg(m_failures);
            else
                qCInfo(lcWatch).noquote() << QStringLiteral("%1: %2 sent").arg(name(), notification.key());
            m_failures = 0;
            if (!m_pending.isEmpty() && m_pending.constFirst().key() == notification.key())
                m_pending.removeFirst();
            emit attempted(notification, true);
            sendNext();
            return;
        }
        ++m_failures;
        // Doubling, capped, with no jitter worth having: one watcher, one receiver.
        const qint64 delay = std::min(m_retryCapMs, m_retryBaseMs << std::min(m_failures - 1, 20));
        qCWarning(lcWatch).noquote() << QStringLiteral("%1: %2 not sent (%3); try %4 in %5 ms")
                                            .arg(name(), notification.key(), error)
                                            .arg(m_failures + 1)
                                            .arg(delay);
        if (!m_pending.isEmpty())
            m_retry.start(int(delay));
        emit attempted(notification, false);
    });
}

} // namespace once
