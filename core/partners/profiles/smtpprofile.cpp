#include "partners/profiles/smtpprofile.h"

#include "model/reminder.h"
#include "partners/partnerprofile.h"
#include "partners/smtpsender.h"

#include <QCryptographicHash>
#include <QLocale>

namespace once {

namespace {

constexpr qsizetype MaxLineChars = 998; // RFC 5322 2.1.1, without the CRLF
// RFC 2047 2 allows 75, on lines of at most 76 characters (its 2): "Subject: " comes first.
constexpr qsizetype MaxEncodedWordChars = 76 - 9;
constexpr qsizetype QuotedPrintableLine = 76; // RFC 2045 6.7 (5), with the soft break's '='

bool isPrintableAscii(const QString &text)
{
    for (const QChar c : text) {
        if (c.unicode() < 0x20 || c.unicode() > 0x7e)
            return false;
    }
    return true;
}

bool hasLineBreak(const QString &text)
{
    return text.contains(u'\r') || text.contains(u'\n');
}

// RFC 2047 "B" encoded words of at most 75 characters each, folded onto lines of their
// own; words end on whole characters, so that no encoded word holds half a UTF-8 sequence.
QByteArray encodedWords(const QString &text)
{
    const QByteArray prefix = "=?UTF-8?B?";
    const QByteArray suffix = "?=";
    // 4 base64 characters per 3 bytes: the longest whole-triplet payload that fits.
    const qsizetype maxBytes = (MaxEncodedWordChars - prefix.size() - suffix.size()) / 4 * 3;
    QList<QByteArray> words;
    QByteArray chunk;
    for (qsizetype i = 0; i < text.size();) {
        const qsizetype length = text.at(i).isHighSurrogate() && i + 1 < text.size() ? 2 : 1;
        const QByteArray character = text.mid(i, length).toUtf8();
        if (chunk.size() + character.size() > maxBytes) {
            words.append(prefix + chunk.toBase64() + suffix);
            chunk.clear();
        }
        chunk += character;
        i += length;
    }
    if (!chunk.isEmpty())
        words.append(prefix + chunk.toBase64() + suffix);
    return words.join("\r\n ");
}

QByteArray subjectHeader(const QString &subject)
{
    // ASCII that fits on the line goes as it is; anything else encoded (a long ASCII
    // subject too, as the encoded words fold where plain words might not).
    if (isPrintableAscii(subject) && subject.size() + 9 <= MaxLineChars &&
        !subject.contains(QLatin1String("=?")))
        return "Subject: " + subject.toLatin1();
    return "Subject: " + encodedWords(subject);
}

// RFC 2045 6.7: quoted-printable of UTF-8 text, with CRLF line breaks kept as hard breaks
// and soft breaks keeping every line within 76 characters. A '.' that starts a line is
// encoded too, so no line of the body can read as SMTP's end of data whatever the client
// does about dot-stuffing; trailing spaces and tabs are encoded, as relays strip them.
QByteArray quotedPrintable(const QString &text)
{
    QString normalised = text;
    normalised.replace(QLatin1String("\r\n"), QLatin1String("\n")).replace(u'\r', u'\n');
    QByteArray out;
    const QList<QByteArray> lines = normalised.toUtf8().split('\n');
    for (qsizetype l = 0; l < lines.size(); ++l) {
        const QByteArray &line = lines.at(l);
        qsizetype column = 0;
        for (qsizetype i = 0; i < line.size(); ++i) {
            const unsigned char c = static_cast<unsigned char>(line.at(i));
            const bool last = i == line.size() - 1;
            const bool literal = (c >= 33 && c <= 126 && c != '=' && !(c == '.' && column == 0)) ||
                                 ((c == ' ' || c == '\t') && !last);
            const QByteArray piece = literal
                                         ? QByteArray(1, char(c))
                                         : "=" + QByteArray::number(c, 16).toUpper().rightJustified(2, '0');
            if (column + piece.size() > QuotedPrintableLine - 1) {
                out += "=\r\n";
                column = 0;
            }
            // A '.' that a soft break moved to the start of a line: encode it after all.
            out += piece == "." && column == 0 ? QByteArray("=2E") : piece;
            column += piece == "." && column == 0 ? 3 : piece.size();
        }
        if (l + 1 < lines.size())
            out += "\r\n";
    }
    return out;
}

QByteArray rfc5322Date(const QDateTime &now)
{
    // "Sun, 06 Dec 2026 10:57:10 +0000": English names whatever the locale.
    return QLocale::c().toString(now.toUTC(), QStringLiteral("ddd, dd MMM yyyy hh:mm:ss")).toLatin1() +
           " +0000";
}

class SmtpProfile final : public PartnerProfile
{
public:
    QLatin1StringView id() const override { return QLatin1StringView("smtp"); }
    QString name() const override { return QStringLiteral("SMTP"); }
    // No standard makes SMTP submission idempotent, and relays do not deduplicate on
    // Message-ID: a repeated mail is a second mail.
    KeyHonouring honoursKey() const override { return KeyHonouring::Ignored; }
    QStringList requiredFields() const override
    {
        return {QStringLiteral("destination"), QStringLiteral("body")};
    }
    // "starttls": "optional" (the default: STARTTLS when the server offers it) or
    // "required" (no mail goes out over a connection that stayed in plain text).
    QStringList optionNames() const override { return {QStringLiteral("starttls")}; }

    QString settingsProblem(const PartnerSettings &partner) const override
    {
        const QString scheme = partner.url.scheme();
        if (!partner.url.isValid() || partner.url.host().isEmpty())
            return QStringLiteral("needs a \"url\" like smtp://HOST:587 or smtps://HOST:465");
        if (scheme != QLatin1String("smtp") && scheme != QLatin1String("smtps"))
            return QStringLiteral("\"url\" must be smtp:// or smtps://");
        if (partner.from.isEmpty())
            return QStringLiteral("needs a \"from\" address");
        if (const QString problem = smtpAddressProblem(partner.from); !problem.isEmpty())
            return QStringLiteral("\"from\" ") + problem;
        if (!partner.token.isEmpty() && partner.account.isEmpty())
            return QStringLiteral("needs an \"account\" (the SMTP user) for its \"token\" (the password)");
        const QJsonValue starttls = partner.options.value(QLatin1String("starttls"));
        if (!starttls.isUndefined() && starttls != QJsonValue(QStringLiteral("optional")) &&
            starttls != QJsonValue(QStringLiteral("required")))
            return QStringLiteral("\"starttls\" must be \"optional\" or \"required\"");
        if (starttls == QJsonValue(QStringLiteral("required")) && scheme == QLatin1String("smtps"))
            return QStringLiteral("\"starttls\" is for smtp://; smtps:// is TLS from the start");
        return {};
    }

    std::unique_ptr<PartnerSender> createSender(const PartnerSettings &partner, int maxConnections,
                                                int timeoutMs, QObject *parent) const override
    {
        return std::make_unique<SmtpSender>(partner, maxConnections, timeoutMs, parent);
    }
};

} // namespace

const PartnerProfile &smtpProfile()
{
    static const SmtpProfile profile;
    return profile;
}

QString smtpAddressProblem(const QString &address)
{
    if (hasLineBreak(address))
        return QStringLiteral("contains a line break (CR or LF), which would end the header early");
    if (address.isEmpty())
        return QStringLiteral("is empty");
    if (address.size() > 254)
        return QStringLiteral("is longer than 254 characters (RFC 5321 4.5.3.1)");
    for (const QChar c : address) {
        if (c.unicode() <= 0x20 || c.unicode() >= 0x7f)
            return QStringLiteral(
                "must be a plain ASCII address (local@domain) without spaces or control characters");
        if (QStringView(u"<>,;:\"()[]\\").contains(c))
            return QStringLiteral("must be a plain address (local@domain), without %1").arg(c);
    }
    const qsizetype at = address.lastIndexOf(u'@');
    if (at <= 0 || at == address.size() - 1 || address.count(u'@') != 1)
        return QStringLiteral("must read local@domain");
    return {};
}

QByteArray smtpMessageId(const QByteArray &sendKey)
{
    const QByteArray digest = QCryptographicHash::hash(sendKey, QCryptographicHash::Sha256).toHex().left(32);
    return "<once." + digest + "@once.invalid>";
}

QByteArray smtpSendKeyHeader(const QByteArray &sendKey)
{
    static const QByteArray name = "X-Once-Send-Key: ";
    if (name.size() + sendKey.size() <= MaxLineChars)
        return sendKey;
    return "sha256:" + QCryptographicHash::hash(sendKey, QCryptographicHash::Sha256).toHex();
}

std::optional<SmtpMail> buildSmtpMail(const PartnerSettings &partner, const Reminder &reminder,
                                      const QDateTime &now, QString *problem)
{
    const ReminderContent content = ReminderContent::of(reminder, partner);
    if (const QString field = content.missing(smtpProfile().requiredFields()); !field.isEmpty()) {
        *problem = QStringLiteral("the reminder has no \"%1\", which a mail needs").arg(field);
        return std::nullopt;
    }
    if (const QString why = smtpAddressProblem(content.destination); !why.isEmpty()) {
        *problem = QStringLiteral("the destination ") + why;
        return std::nullopt;
    }
    if (const QString why = smtpAddressProblem(partner.from); !why.isEmpty()) {
        *problem = QStringLiteral("the partner's \"from\" ") + why;
        return std::nullopt;
    }
    if (hasLineBreak(content.subject)) {
        *problem =
            QStringLiteral("the subject contains a line break (CR or LF), which would end the header early");
        return std::nullopt;
    }
    for (const QChar c : content.subject) {
        if (c.category() == QChar::Other_Control) {
            *problem = QStringLiteral("the subject contains a control character");
            return std::nullopt;
        }
    }
    const QByteArray key = reminder.sendKey;
    for (const char c : key) {
        if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
            // The ledger's keys are printable ASCII; one that is not never reaches a header.
            *problem = QStringLiteral("the send key is not printable ASCII");
            return std::nullopt;
        }
    }

    return composeSmtpMail(partner.from, content.destination, content.subject, content.body, smtpMessageId(key), now,
                           {"X-Once-Send-Key: " + smtpSendKeyHeader(key)});
}

SmtpMail composeSmtpMail(const QString &from, const QString &to, const QString &subject, const QString &body,
                         const QByteArray &messageId, const QDateTime &now, const QList<QByteArray> &extraHeaders)
{
    SmtpMail mail;
    mail.envelopeFrom = from.toLatin1();
    mail.envelopeTo = to.toLatin1();
    mail.messageId = messageId;
    QList<QByteArray> headers{
        "From: " + mail.envelopeFrom,
        "To: " + mail.envelopeTo,
        subjectHeader(subject),
        "Date: " + rfc5322Date(now),
        "Message-ID: " + mail.messageId,
    };
    headers += extraHeaders;
    headers += {
        "MIME-Version: 1.0",
        "Content-Type: text/plain; charset=UTF-8",
        "Content-Transfer-Encoding: quoted-printable",
    };
    mail.message = headers.join("\r\n") + "\r\n\r\n" + quotedPrintable(body) + "\r\n";
    return mail;
}

} // namespace once
