#pragma once

#include "delivery/partnersender.h"
#include "partners/partnersettings.h"
#include "partners/profiles/smtpprofile.h"

#include <QThreadPool>

#include <atomic>
#include <memory>

namespace once {

// How one SMTP transaction ended, in terms that do not depend on the client library.
struct SmtpAttempt
{
    enum class Failure
    {
        None,           // the server answered 250 to the final dot
        Resolve,        // the host's name did not resolve
        Connect,        // no connection
        Tls,            // the TLS handshake failed, or STARTTLS was required and not offered
        LoginDenied,    // AUTH was refused
        ServerReply,    // the server answered with a code that ended the transaction
        TimedOut,       // no reply in time
        ConnectionLost, // the connection broke
        Other,
    };
    Failure failure = Failure::Other;
    int replyCode = 0; // the last reply code read, 0 when none
    QString reply;     // the text of that reply, after its code
    QString error;     // the client's own one-line account of the failure
    // Whether the last reply answered MAIL, RCPT, DATA or the dot (this mail), rather than
    // the greeting, EHLO, STARTTLS or AUTH (the session, whichever the mail).
    bool inTransaction = false;
    // Whether the whole message, the final dot included, was handed to the client to
    // send: before that the server cannot have accepted the mail (RFC 5321 4.1.1.4: only
    // the dot completes it), after it the server may have, whatever reached us.
    bool messageHandedOver = false;
    qint64 latencyMs = 0;
};

// Everything one SMTP transaction needs, copied, so that it can run on any thread.
struct SmtpTransaction
{
    QByteArray url; // smtp://HOST:PORT or smtps://HOST:PORT: no user, path or query
    QByteArray user;     // empty: no AUTH
    QByteArray password;
    QByteArray caBundle;          // PEM of the server's own CAs, empty: the system's
    QByteArray clientCertificate; // PEM, mutual TLS
    QByteArray clientKey;
    bool starttlsRequired = false; // refuse a server that stays in plain text
    int timeoutMs = 10000;
    SmtpMail mail;
};

// Runs one transaction with libcurl's SMTP client, blocking the calling thread (never the
// event loop's: the channels' sender and once watch's mail notifier run it in a pool of
// their own) until the server accepted the mail, refused it, or timeoutMs passed; a
// stopping flag set meanwhile cuts it short. Every mail gets its own connection.
SmtpAttempt runSmtpTransaction(const SmtpTransaction &transaction, const std::shared_ptr<std::atomic_bool> &stopping);

// What an SMTP transaction meant for the reminder. Transient before the message was
// complete (nothing can have been delivered), and for 4xx; Permanent for 5xx to this mail
// (550 no such user), Transient for 5xx to the session; CredentialsRefused for 530/534/535 and a refused
// AUTH; InDoubt when the message was complete and no reply to it came (RFC 1047). Text from the server and
// the client is redacted and kept to one line.
SendOutcome classifySmtp(const SmtpAttempt &attempt, const SecretRedactor &redactor);

// Sends mails with libcurl's SMTP client, each on a blocking easy handle in a pool of at
// most maxConnections threads of its own, so that the thread calling send() never waits on
// the network; each outcome is delivered on the context's thread. Every mail gets its own
// connection: a connection reused after an in-doubt mail could carry the next one into the
// same unknown.
class SmtpSender final : public PartnerSender
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(SmtpSender)

public:
    SmtpSender(const PartnerSettings &partner, int maxConnections, int timeoutMs, QObject *parent = nullptr);
    // Aborts the transactions in flight and waits for the threads; their outcomes are
    // dropped with the sender.
    ~SmtpSender() override;

    void send(const Reminder &reminder, QObject *context,
              std::function<void(const SendOutcome &)> onFinished) override;
    QString displayUrl() const override;

private:
    PartnerSettings m_partner;
    int m_timeoutMs = 10000;
    SecretRedactor m_redactor;
    QByteArray m_caBundle;          // PEM of the partner's own CAs, empty: the system's
    QByteArray m_clientCertificate; // PEM, mutual TLS
    QByteArray m_clientKey;
    std::shared_ptr<std::atomic_bool> m_stopping = std::make_shared<std::atomic_bool>(false);
    QThreadPool m_pool;
};

} // namespace once
