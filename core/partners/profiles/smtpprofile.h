#pragma once

#include <QByteArray>
#include <QDateTime>
#include <QString>

#include <optional>

namespace once {

class PartnerProfile;
struct PartnerSettings;
struct Reminder;

// Plain SMTP (RFC 5321), smtp:// with STARTTLS where the server offers it (the partner's
// "starttls": "required" insists) or smtps:// with TLS from the start, sent by libcurl's
// SMTP client. A mail is accepted at the 250 after the final dot; a connection lost
// between the dot and that reply leaves the send in doubt (RFC 1047). SMTP has no
// idempotency and no lookup: an in-doubt send is held for an operator.
const PartnerProfile &smtpProfile();

// One mail as it goes over the wire: the envelope and the message (RFC 5322), CRLF lines.
struct SmtpMail
{
    QByteArray envelopeFrom; // MAIL FROM's address, without angle brackets
    QByteArray envelopeTo;   // RCPT TO's address
    QByteArray messageId;    // "<once.HEX@once.invalid>", the same on every try of a key
    QByteArray message;      // headers, empty line, quoted-printable body
};

// The mail that sends this reminder, or nothing with *problem saying (in one line) why it
// cannot be sent: a destination or "from" that is not a plain address, or that holds a
// line break (it would add headers of its own: never sent), or a missing body.
std::optional<SmtpMail> buildSmtpMail(const PartnerSettings &partner, const Reminder &reminder,
                                      const QDateTime &now, QString *problem);

// A plain-text mail (UTF-8, quoted-printable) from and to addresses smtpAddressProblem()
// accepts, with a subject free of line breaks: the headers every mail of once's has, then
// extraHeaders ("Name: value") after the Message-ID.
SmtpMail composeSmtpMail(const QString &from, const QString &to, const QString &subject, const QString &body,
                         const QByteArray &messageId, const QDateTime &now, const QList<QByteArray> &extraHeaders = {});

// "<once.FIRST-32-HEX-OF-SHA256(KEY)@once.invalid>": a key's Message-ID. The .invalid
// domain (RFC 2606) makes it ours and unique without naming a host of the sender.
QByteArray smtpMessageId(const QByteArray &sendKey);
// The X-Once-Send-Key header's value: the key itself, or "sha256:" and its digest in hex
// when the key would not fit in one 998-character line (RFC 5322 2.1.1; it has no
// whitespace to fold at).
QByteArray smtpSendKeyHeader(const QByteArray &sendKey);

// Whether an address is one we can put in an envelope and a header as it is: local@domain,
// printable ASCII without spaces, angle brackets, commas or quotes. A one-line reason, or
// an empty string when it is.
QString smtpAddressProblem(const QString &address);

} // namespace once
