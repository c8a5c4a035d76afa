#include "partners/smtpsender.h"

#include "model/partnerpolicy.h"
#include "model/reminder.h"
#include "partners/partnerprofile.h"
#include "partners/profiles/smtpprofile.h"

#include <QElapsedTimer>
#include <QPointer>
#include <QSslCertificate>
#include <QThread>

#include <curl/curl.h>

#include <cstring>
#include <mutex>

namespace once {

namespace {

// Where the transaction was when its last reply came: what a 5xx refuses.
enum class Stage
{
    Connect,
    Hello,
    StartTls,
    Auth,
    MailFrom,
    RcptTo,
    Data,
    Quit
};

// One mail in flight: what libcurl reads the message from and what it tells us.
struct Transfer
{
    QByteArray message;
    qsizetype offset = 0;
    bool handedOver = false;
    Stage stage = Stage::Connect;      // after the last command we sent
    Stage replyStage = Stage::Connect; // when the last reply (not QUIT's) came
    int replyCode = 0;
    QByteArray reply;    // the last reply line, before QUIT's
    QByteArray dotReply; // the first reply after the whole message was handed over
    std::shared_ptr<std::atomic_bool> stopping;
};

size_t readMessage(char *buffer, size_t size, size_t items, void *user)
{
    auto *transfer = static_cast<Transfer *>(user);
    const qsizetype left = transfer->message.size() - transfer->offset;
    const qsizetype count = std::min<qsizetype>(left, qsizetype(size * items));
    std::memcpy(buffer, transfer->message.constData() + transfer->offset, size_t(count));
    transfer->offset += count;
    // libcurl knows the size (CURLOPT_INFILESIZE_LARGE) and writes the final dot once it
    // has it all, without asking for the end: from here the server may accept the mail,
    // whatever we hear of it.
    if (transfer->offset == transfer->message.size())
        transfer->handedOver = true;
    return size_t(count);
}

// libcurl's protocol trace: the commands we sent (only their verb is read: AUTH's
// arguments are credentials) and the server's replies.
int traceProtocol(CURL *, curl_infotype type, char *data, size_t size, void *user)
{
    auto *transfer = static_cast<Transfer *>(user);
    if (type == CURLINFO_HEADER_OUT) {
        const QByteArray verb = QByteArray(data, qsizetype(std::min<size_t>(size, 16)))
                                    .split(' ')
                                    .constFirst()
                                    .trimmed()
                                    .toUpper();
        if (verb == "EHLO" || verb == "HELO")
            transfer->stage = Stage::Hello;
        else if (verb == "STARTTLS")
            transfer->stage = Stage::StartTls;
        else if (verb == "AUTH")
            transfer->stage = Stage::Auth;
        else if (verb == "MAIL")
            transfer->stage = Stage::MailFrom;
        else if (verb == "RCPT")
            transfer->stage = Stage::RcptTo;
        else if (verb == "DATA")
            transfer->stage = Stage::Data;
        else if (verb == "QUIT")
            transfer->stage = Stage::Quit;
        return 0;
    }
    if (type != CURLINFO_HEADER_IN || transfer->stage == Stage::Quit)
        return 0;
    const QByteArray line = QByteArray(data, qsizetype(size)).trimmed();
    if (line.size() < 3)
        return 0;
    bool ok = false;
    const int code = line.left(3).toInt(&ok);
    if (!ok)
        return 0;
    transfer->replyCode = code;
    transfer->replyStage = transfer->stage;
    transfer->reply = line.mid(4).trimmed();
    if (transfer->handedOver && transfer->dotReply.isEmpty())
        transfer->dotReply = line;
    return 0;
}

int checkStopping(void *user, curl_off_t, curl_off_t, curl_off_t, curl_off_t)
{
    return static_cast<Transfer *>(user)->stopping->load() ? 1 : 0;
}

SmtpAttempt::Failure failureOf(CURLcode code)
{
    switch (code) {
    case CURLE_OK:
        return SmtpAttempt::Failure::None;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return SmtpAttempt::Failure::Resolve;
    case CURLE_COULDNT_CONNECT:
        return SmtpAttempt::Failure::Connect;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_USE_SSL_FAILED:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return SmtpAttempt::Failure::Tls;
    case CURLE_LOGIN_DENIED:
        return SmtpAttempt::Failure::LoginDenied;
    case CURLE_OPERATION_TIMEDOUT:
        return SmtpAttempt::Failure::TimedOut;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_ABORTED_BY_CALLBACK:
        return SmtpAttempt::Failure::ConnectionLost;
    default:
        return SmtpAttempt::Failure::Other;
    }
}

QString failureClass(SmtpAttempt::Failure failure)
{
    switch (failure) {
    case SmtpAttempt::Failure::Resolve:
    case SmtpAttempt::Failure::Connect:
    case SmtpAttempt::Failure::Tls:
        // As an HTTP request that never left: nothing of the mail reached the server (the
        // verdicts count such a try as no call at all). The error says which it was.
        return QStringLiteral("connect-failed");
    case SmtpAttempt::Failure::TimedOut:
        return QStringLiteral("timeout");
    case SmtpAttempt::Failure::None:
    case SmtpAttempt::Failure::LoginDenied:
    case SmtpAttempt::Failure::ServerReply:
    case SmtpAttempt::Failure::ConnectionLost:
    case SmtpAttempt::Failure::Other:
        break;
    }
    return QStringLiteral("connection-lost");
}

QByteArray pemOf(const QList<QSslCertificate> &certificates)
{
    QByteArray pem;
    for (const QSslCertificate &certificate : certificates)
        pem += certificate.toPem();
    return pem;
}

QList<QByteArray> smtpSecrets(const PartnerSettings &partner)
{
    QList<QByteArray> secrets = partner.secrets();
    if (!partner.token.isEmpty()) {
        // As AUTH PLAIN and AUTH LOGIN carry it, should a server echo the command.
        secrets.append(partner.token.toBase64());
        secrets.append(QByteArray('\0' + partner.account + '\0' + partner.token).toBase64());
    }
    return secrets;
}

void initialiseCurl()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

} // namespace

SmtpAttempt runSmtpTransaction(const SmtpTransaction &transaction, const std::shared_ptr<std::atomic_bool> &stopping)
{
    initialiseCurl();
    QElapsedTimer clock;
    clock.start();
    const SmtpMail &mail = transaction.mail;
    Transfer transfer;
    transfer.message = mail.message;
    transfer.stopping = stopping;
    char errorBuffer[CURL_ERROR_SIZE] = {};
    CURL *curl = curl_easy_init();
    const QByteArray envelopeFrom = QByteArray("<" + mail.envelopeFrom + ">");
    const QByteArray envelopeTo = QByteArray("<" + mail.envelopeTo + ">");
    curl_slist *recipients = curl_slist_append(nullptr, envelopeTo.constData());
    curl_easy_setopt(curl, CURLOPT_URL, transaction.url.constData());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errorBuffer);
    // STARTTLS where offered; "required" refuses a server that stays in plain text.
    // smtps:// is TLS from the first byte either way.
    curl_easy_setopt(curl, CURLOPT_USE_SSL, long(transaction.starttlsRequired ? CURLUSESSL_ALL : CURLUSESSL_TRY));
    if (!transaction.user.isEmpty()) {
        curl_easy_setopt(curl, CURLOPT_USERNAME, transaction.user.constData());
        curl_easy_setopt(curl, CURLOPT_PASSWORD, transaction.password.constData());
    }
    QByteArray ca = transaction.caBundle;
    QByteArray certificate = transaction.clientCertificate;
    QByteArray key = transaction.clientKey;
    if (!ca.isEmpty()) {
        curl_blob blob{ca.data(), size_t(ca.size()), CURL_BLOB_COPY};
        curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &blob);
    }
    if (!certificate.isEmpty()) {
        curl_blob certificateBlob{certificate.data(), size_t(certificate.size()), CURL_BLOB_COPY};
        curl_blob keyBlob{key.data(), size_t(key.size()), CURL_BLOB_COPY};
        curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &certificateBlob);
        curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &keyBlob);
    }
    curl_easy_setopt(curl, CURLOPT_MAIL_FROM, envelopeFrom.constData());
    curl_easy_setopt(curl, CURLOPT_MAIL_RCPT, recipients);
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, curl_off_t(mail.message.size()));
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, readMessage);
    curl_easy_setopt(curl, CURLOPT_READDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_VERBOSE, 1L);
    curl_easy_setopt(curl, CURLOPT_DEBUGFUNCTION, traceProtocol);
    curl_easy_setopt(curl, CURLOPT_DEBUGDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, checkStopping);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    // RFC 5321 4.5.3.2 asks a client to wait 10 minutes for the reply to the dot; the
    // worker's --timeout is far shorter, and a send it cuts short is in doubt, held,
    // never resent.
    const int timeoutMs = transaction.timeoutMs;
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, long(timeoutMs));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, long(timeoutMs));
    // libcurl 7.88 waits for the reply to the dot with its server response timeout
    // (120 s by default), not CURLOPT_TIMEOUT_MS: bound that wait too, in seconds.
    curl_easy_setopt(curl, CURLOPT_SERVER_RESPONSE_TIMEOUT, long(std::max(1, (timeoutMs + 999) / 1000)));
    const CURLcode result = curl_easy_perform(curl);
    long lastCode = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &lastCode);
    curl_slist_free_all(recipients);
    curl_easy_cleanup(curl);

    SmtpAttempt attempt;
    attempt.failure = failureOf(result);
    attempt.replyCode = transfer.replyCode ? transfer.replyCode : int(lastCode);
    attempt.reply = QString::fromUtf8(transfer.reply);
    attempt.messageHandedOver = transfer.handedOver;
    attempt.latencyMs = clock.elapsed();
    if (result == CURLE_OK) {
        attempt.reply = QString::fromUtf8(transfer.dotReply.mid(4).trimmed());
    } else {
        attempt.error = QString::fromUtf8(errorBuffer[0] ? errorBuffer : curl_easy_strerror(result));
        if (attempt.failure != SmtpAttempt::Failure::LoginDenied && attempt.replyCode >= 400)
            attempt.failure = SmtpAttempt::Failure::ServerReply;
        attempt.inTransaction = transfer.replyStage == Stage::MailFrom || transfer.replyStage == Stage::RcptTo ||
                                transfer.replyStage == Stage::Data;
    }
    return attempt;
}

SendOutcome classifySmtp(const SmtpAttempt &attempt, const SecretRedactor &redactor)
{
    SendOutcome outcome;
    outcome.latencyMs = attempt.latencyMs;
    const QString reply = partnerText(attempt.reply, redactor, MaxReasonChars);
    const QString said = attempt.replyCode > 0
                             ? QStringLiteral("SMTP %1%2")
                                   .arg(attempt.replyCode)
                                   .arg(reply.isEmpty() ? QString() : QStringLiteral(": ") + reply)
                             : QString();
    if (attempt.failure == SmtpAttempt::Failure::None) {
        outcome.kind = SendOutcome::Kind::Applied;
        // The reply to the dot often names the queue id ("2.0.0 Ok: queued as 4Xk2p").
        outcome.providerRequestId = partnerText(attempt.reply, redactor, MaxRequestIdChars);
        return outcome;
    }
    const int code = attempt.replyCode;
    // 530 authentication required, 534 mechanism too weak, 535 credentials invalid (RFC 4954 6).
    if (attempt.failure == SmtpAttempt::Failure::LoginDenied || code == 530 || code == 534 || code == 535) {
        outcome.setCredentialsRefused();
        outcome.error = said.isEmpty() ? QStringLiteral("the SMTP server refused the login") : said;
    } else if (attempt.failure == SmtpAttempt::Failure::ServerReply && code >= 500) {
        // Refused in the session (the greeting, EHLO, STARTTLS, AUTH), a refusal of every
        // mail alike: wait, as for an outage. Refused in the transaction, this mail.
        outcome.kind = attempt.inTransaction ? SendOutcome::Kind::Permanent : SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("smtp-5xx");
        outcome.error = said;
    } else if (attempt.failure == SmtpAttempt::Failure::ServerReply && code >= 400) {
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = QStringLiteral("smtp-4xx");
        outcome.error = said;
    } else if (attempt.messageHandedOver) {
        // RFC 1047: the server may have taken the mail and its 250 been lost.
        outcome.kind = SendOutcome::Kind::InDoubt;
        outcome.errorClass = QStringLiteral("in-doubt");
        outcome.error = QStringLiteral("no reply to the end of the mail: ") +
                        partnerText(attempt.error, redactor, MaxReasonChars);
    } else {
        outcome.kind = SendOutcome::Kind::Transient;
        outcome.errorClass = failureClass(attempt.failure);
        outcome.error = partnerText(attempt.error, redactor, MaxReasonChars) +
                        (said.isEmpty() ? QString() : QStringLiteral(" (") + said + u')');
    }
    outcome.error = partnerText(outcome.error, redactor, MaxErrorChars);
    return outcome;
}

SmtpSender::SmtpSender(const PartnerSettings &partner, int maxConnections, int timeoutMs, QObject *parent)
    : PartnerSender(parent), m_partner(partner), m_timeoutMs(timeoutMs), m_redactor(smtpSecrets(partner)),
      m_caBundle(pemOf(partner.tls.caCertificates)),
      m_clientCertificate(pemOf(partner.tls.clientCertificates)),
      m_clientKey(partner.tls.clientKey.isNull() ? QByteArray() : partner.tls.clientKey.toPem())
{
    initialiseCurl();
    m_pool.setMaxThreadCount(std::max(1, maxConnections));
    m_pool.setObjectName(QStringLiteral("once-smtp"));
}

SmtpSender::~SmtpSender()
{
    m_stopping->store(true);
    m_pool.clear();
    m_pool.waitForDone();
}

QString SmtpSender::displayUrl() const
{
    QUrl url = m_partner.url;
    url.setQuery(QString());
    return partnerName(url);
}

void SmtpSender::send(const Reminder &reminder, QObject *context,
                      std::function<void(const SendOutcome &)> onFinished)
{
    QString problem;
    std::optional<SmtpMail> mail =
        buildSmtpMail(m_partner, reminder, QDateTime::currentDateTimeUtc(), &problem);
    if (!mail) {
        SendOutcome outcome;
        outcome.kind = SendOutcome::Kind::Unsendable;
        // A field the reminder lacks, as the HTTP profiles say it; else a value that cannot
        // go into a mail (a second address, a line break).
        outcome.errorClass =
            ReminderContent::of(reminder, m_partner).missing(smtpProfile().requiredFields()).isEmpty()
                ? QStringLiteral("unsendable")
                : QStringLiteral("missing-field");
        outcome.error = problem;
        QMetaObject::invokeMethod(
            context, [onFinished = std::move(onFinished), outcome] { onFinished(outcome); },
            Qt::QueuedConnection);
        return;
    }

    QUrl url = m_partner.url;
    url.setUserInfo(QString());
    url.setQuery(QString());
    url.setPath(QString());
    const bool starttlsRequired =
        m_partner.options.value(QLatin1String("starttls")) == QJsonValue(QStringLiteral("required"));
    SmtpTransaction transaction;
    transaction.url = url.toEncoded();
    transaction.user = m_partner.account;
    transaction.password = m_partner.token;
    transaction.caBundle = m_caBundle;
    transaction.clientCertificate = m_clientCertificate;
    transaction.clientKey = m_clientKey;
    transaction.starttlsRequired = starttlsRequired;
    transaction.timeoutMs = m_timeoutMs;
    transaction.mail = std::move(*mail);
    // Everything the thread needs, copied: the sender may be gone before the outcome is.
    m_pool.start([transaction = std::move(transaction), redactor = m_redactor, stopping = m_stopping, self = this,
                  context = QPointer<QObject>(context), onFinished = std::move(onFinished)]() mutable {
        const SmtpAttempt attempt = runSmtpTransaction(transaction, stopping);
        // Back on the sender's thread first, where the context's QPointer can be read
        // safely; the sender outlives this task (its destructor waits for the pool).
        QMetaObject::invokeMethod(
            self,
            [context, onFinished = std::move(onFinished),
             outcome = classifySmtp(attempt, redactor)]() mutable {
                if (!context)
                    return;
                if (context->thread() == QThread::currentThread()) {
                    onFinished(outcome);
                    return;
                }
                QMetaObject::invokeMethod(
                    context.data(), [onFinished = std::move(onFinished), outcome] { onFinished(outcome); },
                    Qt::QueuedConnection);
            },
            Qt::QueuedConnection);
    });
}

} // namespace once
