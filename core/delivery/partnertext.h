#pragma once

#include <QByteArray>
#include <QList>
#include <QString>
#include <QStringList>

namespace once {

// Replaces secrets wherever a partner may echo them: a partner's error page may show the
// request's own Authorization header. Each secret is looked for as sent, percent-encoded
// and JSON-escaped, in any letter case.
class SecretRedactor final
{
public:
    SecretRedactor() = default;
    explicit SecretRedactor(const QList<QByteArray> &secrets);

    QString redact(QString text) const;
    bool isEmpty() const { return m_forms.isEmpty(); }

    static QString replacement() { return QStringLiteral("[redacted]"); }

private:
    QStringList m_forms; // longest first, so that no shorter form leaves part of a longer one
};

// Text a partner sent, made fit to be stored and shown on one line: secrets redacted,
// control and format characters (escape sequences, bidi overrides, NUL) replaced with
// U+FFFD, whitespace runs collapsed, then cut to maxChars with an ellipsis. The cut comes
// last, so it never leaves half a secret.
QString partnerText(const QString &text, const SecretRedactor &redactor, qsizetype maxChars);

} // namespace once
