#include "text/strictjson.h"

#include "text/hexdigits.h"
#include "text/quotedtext.h"
#include "text/utf8text.h"

#include <QSet>
#include <QVarLengthArray>

#include <algorithm>
#include <cstring>
#include <optional>

namespace once {

namespace {

bool isHighSurrogate(uint unit)
{
    return unit >= 0xd800 && unit <= 0xdbff;
}

bool isLowSurrogate(uint unit)
{
    return unit >= 0xdc00 && unit <= 0xdfff;
}

// The length of the well-formed UTF-8 sequence at p (Unicode's table 3-7), or 0.
int utf8SequenceLength(const uchar *p, const uchar *end)
{
    const uchar first = p[0];
    int length = 0;
    uchar low = 0x80, high = 0xbf; // the bounds of the second byte
    if (first >= 0xc2 && first <= 0xdf) {
        length = 2;
    } else if (first >= 0xe0 && first <= 0xef) {
        length = 3;
        if (first == 0xe0)
            low = 0xa0; // no overlong forms
        else if (first == 0xed)
            high = 0x9f; // no surrogates
    } else if (first >= 0xf0 && first <= 0xf4) {
        length = 4;
        if (first == 0xf0)
            low = 0x90;
        else if (first == 0xf4)
            high = 0x8f; // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (end - p < length || p[1] < low || p[1] > high)
        return 0;
    for (int i = 2; i < length; ++i) {
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    }
    return length;
}

void appendUtf8(QByteArray *out, char32_t code)
{
    if (code < 0x80) {
        out->append(char(code));
    } else if (code < 0x800) {
        out->append(char(0xc0 | (code >> 6)));
        out->append(char(0x80 | (code & 0x3f)));
    } else if (code < 0x10000) {
        out->append(char(0xe0 | (code >> 12)));
        out->append(char(0x80 | ((code >> 6) & 0x3f)));
        out->append(char(0x80 | (code & 0x3f)));
    } else {
        out->append(char(0xf0 | (code >> 18)));
        out->append(char(0x80 | ((code >> 12) & 0x3f)));
        out->append(char(0x80 | ((code >> 6) & 0x3f)));
        out->append(char(0x80 | (code & 0x3f)));
    }
}

QString hex4(uint value)
{
    return QStringLiteral("%1").arg(value, 4, 16, QLatin1Char('0')).toUpper();
}

// The names of one object so far. Most objects have a few, compared one by one without a
// hash; a hostile message with thousands in one object is compared through a set, so
// that the check stays linear in the message.
class ObjectNames
{
public:
    // False when the name was there already.
    bool insert(const QByteArray &name)
    {
        if (!m_set.isEmpty()) {
            const auto before = m_set.size();
            m_set.insert(name);
            return m_set.size() != before;
        }
        if (std::find(m_few.cbegin(), m_few.cend(), name) != m_few.cend())
            return false;
        m_few.append(name);
        if (m_few.size() == FewNames)
            m_set = QSet<QByteArray>(m_few.cbegin(), m_few.cend());
        return true;
    }

private:
    static constexpr qsizetype FewNames = 32;
    QVarLengthArray<QByteArray, FewNames> m_few;
    QSet<QByteArray> m_set;
};

// A recursive descent over RFC 8259's grammar that stops at the first problem. The
// recursion is as deep as the nesting, which MaxJsonDepth bounds.
class Checker
{
public:
    explicit Checker(const QByteArray &text, std::span<JsonMember> members = {})
        : m_begin(reinterpret_cast<const uchar *>(text.constData())), m_p(m_begin),
          m_end(m_begin + text.size()), m_members(members)
    {
    }

    bool topIsObject() const { return m_topIsObject; }

    QString run()
    {
        if (m_end - m_p >= 3 && std::memcmp(m_p, "\xef\xbb\xbf", 3) == 0)
            m_p += 3;
        skipSpace();
        m_topIsObject = at('{');
        if (!value(0))
            return m_error;
        skipSpace();
        if (m_p != m_end) {
            malformed("text after the value");
            return m_error;
        }
        return {};
    }

private:
    bool fail(const QString &what, const uchar *at)
    {
        m_error = what + QStringLiteral(" at offset ") + QString::number(at - m_begin);
        return false;
    }

    bool malformed(const char *what)
    {
        m_error = QStringLiteral("malformed JSON at offset ") + QString::number(m_p - m_begin) + QStringLiteral(": ")
                  + QLatin1String(what);
        return false;
    }

    bool at(char c) const { return m_p != m_end && *m_p == uchar(c); }

    void skipSpace()
    {
        while (m_p != m_end && (*m_p == ' ' || *m_p == '\t' || *m_p == '\n' || *m_p == '\r'))
            ++m_p;
    }

    bool value(int depth)
    {
        if (m_p == m_end)
            return malformed("expected a value");
        switch (*m_p) {
        case '{':
            return object(depth + 1);
        case '[':
            return array(depth + 1);
        case '"':
            return string(nullptr);
        case 't':
            return literal("true");
        case 'f':
            return literal("false");
        case 'n':
            return literal("null");
        default:
            return number();
        }
    }

    bool nestingAllowed(int depth)
    {
        if (depth <= MaxJsonDepth)
            return true;
        return fail(QStringLiteral("nested deeper than %1 levels").arg(MaxJsonDepth), m_p);
    }

    bool object(int depth)
    {
        if (!nestingAllowed(depth))
            return false;
        ++m_p;
        skipSpace();
        if (at('}')) {
            ++m_p;
            return true;
        }
        ObjectNames names;
        for (;;) {
            skipSpace();
            if (!at('"'))
                return malformed("expected a name in double quotes");
            const uchar *nameAt = m_p;
            QByteArray name;
            if (!stringText(&name))
                return false;
            if (!names.insert(name))
                return fail(QStringLiteral("duplicate field ") + quotedForError(QString::fromUtf8(name)),
                            nameAt);
            skipSpace();
            if (!at(':'))
                return malformed("expected ':' after a name");
            ++m_p;
            skipSpace();
            JsonMember *wanted = depth == 1 ? memberNamed(name) : nullptr;
            if (wanted && at('"')) {
                QByteArray text;
                if (!stringText(&text))
                    return false;
                wanted->kind = JsonMember::Kind::String;
                wanted->text = textOfUtf8(text);
            } else {
                if (wanted)
                    wanted->kind = at('n') ? JsonMember::Kind::Null : JsonMember::Kind::Other;
                if (!value(depth))
                    return false;
            }
            if (const auto more = nextMember('}', "expected ',' or '}'"); !more)
                return false;
            else if (!*more)
                return true;
        }
    }

    bool array(int depth)
    {
        if (!nestingAllowed(depth))
            return false;
        ++m_p;
        skipSpace();
        if (at(']')) {
            ++m_p;
            return true;
        }
        for (;;) {
            skipSpace();
            if (!value(depth))
                return false;
            if (const auto more = nextMember(']', "expected ',' or ']'"); !more)
                return false;
            else if (!*more)
                return true;
        }
    }

    // After a member of an object or an array: true after a ',', false after the closing
    // bracket, nothing (an error reported) otherwise.
    std::optional<bool> nextMember(char close, const char *expected)
    {
        skipSpace();
        if (at(',') || at(close)) {
            const bool more = at(',');
            ++m_p;
            return more;
        }
        malformed(expected);
        return std::nullopt;
    }

    JsonMember *memberNamed(const QByteArray &name)
    {
        for (JsonMember &member : m_members) {
            if (QLatin1StringView(name) == member.name)
                return &member;
        }
        return nullptr;
    }

    // A string's text as UTF-8 after its escapes (names are compared so). Without escapes
    // that is the bytes as written, not copied: they live as long as the check.
    bool stringText(QByteArray *text)
    {
        const uchar *quote = m_p;
        m_sawEscape = false;
        if (!string(nullptr))
            return false;
        if (!m_sawEscape) {
            *text = QByteArray::fromRawData(reinterpret_cast<const char *>(quote + 1), m_p - quote - 2);
            return true;
        }
        const uchar *after = m_p;
        m_p = quote;
        string(text);
        m_p = after;
        return true;
    }

    // decoded, when given, receives the string's text as UTF-8.
    bool string(QByteArray *decoded)
    {
        ++m_p;
        // Qt's reader drops a byte order mark that opens a string; a partner keeps it.
        if (m_end - m_p >= 3 && std::memcmp(m_p, "\xef\xbb\xbf", 3) == 0)
            return fail(QStringLiteral("byte order mark U+FEFF at the start of a string"), m_p);
        for (;;) {
            if (m_p == m_end)
                return malformed("unterminated string");
            const uchar c = *m_p;
            if (c == '"') {
                ++m_p;
                return true;
            }
            if (c < 0x20)
                return fail(QStringLiteral("control character U+") + hex4(c) + QStringLiteral(" inside a string"), m_p);
            if (c == '\\') {
                if (!escape(decoded))
                    return false;
                continue;
            }
            const int length = c < 0x80 ? 1 : utf8SequenceLength(m_p, m_end);
            if (length == 0)
                return fail(QStringLiteral("invalid UTF-8"), m_p);
            if (decoded)
                decoded->append(reinterpret_cast<const char *>(m_p), length);
            m_p += length;
        }
    }

    bool hexUnit(const uchar *p, uint *unit) const
    {
        if (m_end - p < 4)
            return false;
        *unit = 0;
        for (int i = 0; i < 4; ++i) {
            const int digit = hexDigitValue(p[i]);
            if (digit < 0)
                return false;
            *unit = *unit * 16 + uint(digit);
        }
        return true;
    }

    bool escape(QByteArray *decoded)
    {
        m_sawEscape = true;
        const uchar *escapeAt = m_p;
        if (m_end - m_p < 2)
            return malformed("unterminated string");
        const uchar kind = m_p[1];
        const char *simple = std::strchr("\"\\/bfnrt", kind);
        if (kind != 0 && simple) {
            static constexpr char meaning[] = "\"\\/\b\f\n\r\t";
            if (decoded)
                decoded->append(meaning[simple - "\"\\/bfnrt"]);
            m_p += 2;
            return true;
        }
        if (kind != 'u') {
            if (kind > 0x20 && kind < 0x7f)
                return fail(QStringLiteral("invalid escape \\") + QLatin1Char(char(kind)), escapeAt);
            return fail(QStringLiteral("invalid escape"), escapeAt);
        }
        uint unit = 0;
        if (!hexUnit(m_p + 2, &unit))
            return fail(QStringLiteral("invalid escape \\u (four hexadecimal digits must follow)"), escapeAt);
        m_p += 6;
        char32_t code = unit;
        if (isHighSurrogate(unit)) {
            uint low = 0;
            if (m_end - m_p < 6 || m_p[0] != '\\' || m_p[1] != 'u' || !hexUnit(m_p + 2, &low) || !isLowSurrogate(low))
                return fail(QStringLiteral("unpaired surrogate \\u") + hex4(unit), escapeAt);
            m_p += 6;
            code = QChar::surrogateToUcs4(char16_t(unit), char16_t(low));
        } else if (isLowSurrogate(unit)) {
            return fail(QStringLiteral("unpaired surrogate \\u") + hex4(unit), escapeAt);
        }
        if (decoded)
            appendUtf8(decoded, code);
        return true;
    }

    bool literal(const char *word)
    {
        const auto length = qsizetype(std::strlen(word));
        if (m_end - m_p < length || std::memcmp(m_p, word, size_t(length)) != 0)
            return malformed("expected a value");
        m_p += length;
        return true;
    }

    bool digits()
    {
        const uchar *start = m_p;
        while (m_p != m_end && *m_p >= '0' && *m_p <= '9')
            ++m_p;
        return m_p != start;
    }

    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and a value a double holds: Qt's
    // parser refuses one that overflows to infinity or whose non-zero digits round to zero
    // (the whole payload is then no JSON to it), and others read infinity or zero.
    bool number()
    {
        const uchar *start = m_p;
        if (at('-'))
            ++m_p;
        if (at('0')) {
            ++m_p;
        } else if (m_p == m_end || *m_p < '1' || *m_p > '9') {
            return malformed("expected a value");
        } else {
            digits();
        }
        if (at('.')) {
            ++m_p;
            if (!digits())
                return malformed("expected a digit after '.'");
        }
        if (at('e') || at('E')) {
            ++m_p;
            if (at('+') || at('-'))
                ++m_p;
            if (!digits())
                return malformed("expected a digit in the exponent");
        }
        bool holds = false;
        QByteArray::fromRawData(reinterpret_cast<const char *>(start), m_p - start).toDouble(&holds);
        if (!holds)
            return fail(QStringLiteral("number %1 is outside the range of a 64-bit floating-point number")
                            .arg(quotedForError(
                                QString::fromLatin1(reinterpret_cast<const char *>(start), m_p - start), 40)),
                        start);
        return true;
    }

    const uchar *m_begin;
    const uchar *m_p;
    const uchar *m_end;
    std::span<JsonMember> m_members;
    QString m_error;
    bool m_sawEscape = false;
    bool m_topIsObject = false;
};

} // namespace

QString strictJsonProblem(const QByteArray &text)
{
    return Checker(text).run();
}

QString readStrictJsonObject(const QByteArray &text, std::span<JsonMember> members, bool *isObject)
{
    Checker checker(text, members);
    const QString problem = checker.run();
    *isObject = problem.isEmpty() && checker.topIsObject();
    if (!problem.isEmpty()) {
        for (JsonMember &member : members)
            member = JsonMember{member.name, JsonMember::Kind::Absent, {}};
    }
    return problem;
}

} // namespace once
