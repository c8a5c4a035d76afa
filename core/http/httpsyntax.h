#pragma once

#include <QByteArrayView>

// Small pieces of HTTP/1.1 syntax shared by the client, the server and the partner simulator.
namespace once::http {

inline bool equalsCi(QByteArrayView a, QByteArrayView b)
{
    return a.compare(b, Qt::CaseInsensitive) == 0;
}

// RFC 9110 5.6.2: token = 1*tchar, what a field name must be.
inline bool isToken(QByteArrayView text)
{
    if (text.isEmpty())
        return false;
    for (const char c : text) {
        const bool tchar = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                           || QByteArrayView("!#$%&'*+-.^_`|~").contains(c);
        if (!tchar)
            return false;
    }
    return true;
}

// RFC 9110 5.5: visible characters, spaces, tabs and obs-text; no other control character
// (a bare CR or a NUL, which one reader may take for a line's end and another not).
inline bool isFieldValue(QByteArrayView text)
{
    for (const char c : text) {
        const auto u = static_cast<unsigned char>(c);
        if ((u < 0x20 && u != '\t') || u == 0x7f)
            return false;
    }
    return true;
}

// Whether a comma-separated header value (Connection, Transfer-Encoding) lists token.
inline bool hasToken(QByteArrayView list, QByteArrayView token)
{
    while (!list.isEmpty()) {
        const qsizetype comma = list.indexOf(',');
        const QByteArrayView item = (comma < 0 ? list : list.first(comma)).trimmed();
        if (equalsCi(item, token))
            return true;
        if (comma < 0)
            break;
        list = list.sliced(comma + 1);
    }
    return false;
}

} // namespace once::http
