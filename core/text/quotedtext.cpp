#include "text/quotedtext.h"

namespace once {

QString quotedForError(QStringView text, qsizetype maxChars)
{
    QString shown = QStringLiteral("\"");
    qsizetype count = 0;
    for (qsizetype i = 0; i < text.size(); ++i) {
        if (count++ == maxChars) {
            shown += QStringLiteral("...");
            break;
        }
        const char16_t c = text.at(i).unicode();
        const bool pairStart = QChar::isHighSurrogate(c) && i + 1 < text.size() && text.at(i + 1).isLowSurrogate();
        switch (c) {
        case u'"':
            shown += QStringLiteral("\\\"");
            continue;
        case u'\\':
            shown += QStringLiteral("\\\\");
            continue;
        case u'\n':
            shown += QStringLiteral("\\n");
            continue;
        case u'\r':
            shown += QStringLiteral("\\r");
            continue;
        case u'\t':
            shown += QStringLiteral("\\t");
            continue;
        default:
            break;
        }
        // Control characters (C0, DEL, C1), the line and paragraph separators, and
        // surrogates that are not a pair would each break the line or the terminal.
        if (c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0x2028 || c == 0x2029
            || (QChar::isSurrogate(c) && !pairStart)) {
            shown += QStringLiteral("\\u") + QStringLiteral("%1").arg(uint(c), 4, 16, QLatin1Char('0')).toUpper();
            continue;
        }
        shown += QChar(c);
        if (pairStart)
            shown += text.at(++i);
    }
    return shown + QLatin1Char('"');
}

QString asOneLine(QString text, qsizetype maxChars)
{
    if (text.size() > maxChars)
        text = text.left(maxChars) + QStringLiteral("...");
    // Line breaks and tabs read as spaces; the other control characters (an ESC that
    // would recolour a terminal, a bell) and line separators as '?'.
    for (QChar &c : text) {
        const char16_t u = c.unicode();
        if (u == u'\r' || u == u'\n' || u == u'\t')
            c = QLatin1Char(' ');
        else if (u < 0x20 || (u >= 0x7f && u <= 0x9f) || u == 0x2028 || u == 0x2029)
            c = QLatin1Char('?');
    }
    return text;
}

} // namespace once
