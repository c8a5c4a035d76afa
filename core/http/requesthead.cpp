#include "http/requesthead.h"

#include "http/httpsyntax.h"

namespace once {

QByteArray HttpHead::header(QByteArrayView name) const
{
    for (const auto &[key, value] : headers) {
        if (http::equalsCi(key, name))
            return value;
    }
    return {};
}

int HttpHead::headerCount(QByteArrayView name) const
{
    int count = 0;
    for (const auto &header : headers) {
        if (http::equalsCi(header.first, name))
            ++count;
    }
    return count;
}

namespace {

bool isDigits(QByteArrayView text)
{
    if (text.isEmpty())
        return false;
    for (const char c : text) {
        if (c < '0' || c > '9')
            return false;
    }
    return true;
}

} // namespace

// What libmicrohttpd 0.9.75 lets through even with MHD_OPTION_STRICT_FOR_CLIENT: it takes
// the first of several Content-Length headers, lets any Transfer-Encoding win over a
// Content-Length, reads the body of a Transfer-Encoding other than chunked until the
// connection closes, and keeps a space before a header's colon as part of the name
// ("Transfer-Encoding :" is then no Transfer-Encoding to it, while a proxy may read one).
const char *framingProblem(const HttpHead &head)
{
    if (!http::isToken(head.method))
        return "the method is not a token";
    for (const auto &[name, value] : head.headers) {
        if (!http::isToken(name))
            return "a header name is not a token";
        if (!http::isFieldValue(value))
            return "a header value holds a control character";
    }
    const int lengths = head.headerCount("Content-Length");
    const int encodings = head.headerCount("Transfer-Encoding");
    if (lengths > 1)
        return "more than one Content-Length";
    if (lengths == 1 && !isDigits(head.header("Content-Length")))
        return "the Content-Length is not a number";
    if (encodings > 1)
        return "more than one Transfer-Encoding";
    if (encodings == 1) {
        if (lengths == 1)
            return "both Content-Length and Transfer-Encoding";
        if (head.version != "HTTP/1.1")
            return "Transfer-Encoding before HTTP/1.1";
        if (!http::equalsCi(head.header("Transfer-Encoding"), "chunked"))
            return "a Transfer-Encoding other than chunked";
    }
    return nullptr;
}

qsizetype headSize(const HttpHead &head)
{
    const qsizetype target = head.path.size() + (head.query.isEmpty() ? 0 : 1 + head.query.size());
    qsizetype size = head.method.size() + 1 + target + 1 + head.version.size() + 2 + 2;
    for (const auto &[name, value] : head.headers)
        size += name.size() + 2 + value.size() + 2;
    return size;
}

} // namespace once
