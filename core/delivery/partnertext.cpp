#include "delivery/partnertext.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QUrl>

#include <algorithm>

namespace once {

namespace {

// How a JSON writer may escape the secret inside a string: Qt's way, and with '/' as
// "\/" as many other writers do.
QStringList jsonForms(const QString &secret)
{
    const QByteArray array = QJsonDocument(QJsonArray{secret}).toJson(QJsonDocument::Compact);
    const QString escaped = QString::fromUtf8(array.mid(2, array.size() - 4)); // without [" and "]
    QString slashes = escaped;
    slashes.replace(QLatin1Char('/'), QLatin1String("\\/"));
    return {escaped, slashes};
}

bool isShown(QChar c)
{
    // Letters, marks, numbers, punctuation, symbols and spaces; not Other_* (controls,
    // format characters such as U+202E, surrogates handled apart, private use, unassigned).
    return c.isPrint() || c.isSpace();
}

} // namespace

SecretRedactor::SecretRedactor(const QList<QByteArray> &secrets)
{
    for (const QByteArray &secret : secrets) {
        if (secret.isEmpty())
            continue;
        const QString text = QString::fromUtf8(secret);
        m_forms << text << QString::fromLatin1(QUrl::toPercentEncoding(text)) << jsonForms(text);
    }
    m_forms.removeDuplicates();
    std::sort(m_forms.begin(), m_forms.end(), [](const QString &a, const QString &b) { return a.size() > b.size(); });
}

QString SecretRedactor::redact(QString text) const
{
    for (const QString &form : m_forms)
        text.replace(form, replacement(), Qt::CaseInsensitive);
    return text;
}

QString partnerText(const QString &text, const SecretRedactor &redactor, qsizetype maxChars)
{
    QString shown = redactor.redact(text);
    for (qsizetype i = 0; i < shown.size(); ++i) {
        const QChar c = shown.at(i);
        if (c.isHighSurrogate() && i + 1 < shown.size() && shown.at(i + 1).isLowSurrogate()) {
            if (!QChar::isPrint(QChar::surrogateToUcs4(c, shown.at(i + 1))))
                shown.replace(i, 2, QChar::ReplacementCharacter);
            else
                ++i;
        } else if (c.isSurrogate() || !isShown(c)) {
            shown[i] = QChar::ReplacementCharacter;
        }
    }
    // Collapsing whitespace may join what a line break kept apart: redact once more.
    shown = redactor.redact(shown.simplified());
    if (shown.size() <= maxChars)
        return shown;
    qsizetype cut = std::max<qsizetype>(0, maxChars - 1);
    if (cut > 0 && shown.at(cut - 1).isHighSurrogate())
        --cut;
    return shown.left(cut) + QChar(0x2026);
}

} // namespace once
