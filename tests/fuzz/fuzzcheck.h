// What every fuzz target shares: a check that stops the run (libFuzzer then saves the
// input that broke it as an artifact), and the input as Qt types.
#pragma once

#include <QByteArray>
#include <QString>
#include <QUrl>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

// Abort with the property that failed and where: libFuzzer reports it as a crash.
#define FUZZ_CHECK(condition, what)                                                                                    \
    do {                                                                                                               \
        if (!(condition)) {                                                                                            \
            std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n  (%s)\n", __FILE__, __LINE__, #condition,          \
                         qPrintable(QString(what)));                                                                   \
            std::abort();                                                                                              \
        }                                                                                                              \
    } while (false)

namespace oncefuzz {

inline QByteArray bytes(const uint8_t *data, size_t size)
{
    return QByteArray(reinterpret_cast<const char *>(data), qsizetype(size));
}

// An error or refusal as once prints it: one line, something in it.
inline bool isOneLine(const QString &text)
{
    return !text.isEmpty() && !text.contains(QLatin1Char('\n')) && !text.contains(QLatin1Char('\r'));
}

// The text with the password of its user part replaced by `marker`, when ":PASSWORD@"
// appears in the text exactly once, as written; empty otherwise. A marker that shows up in what once
// says was echoed from the password, whatever the password was: a check on the password
// itself would trip over passwords such as "URL" that the fixed text also holds.
inline QString withPasswordMarker(const QString &text, const QString &marker)
{
    const QString password = QUrl(text, QUrl::TolerantMode).password(QUrl::FullyEncoded);
    const QString userPart = QLatin1Char(':') + password + QLatin1Char('@');
    if (password.isEmpty() || text.count(userPart) != 1)
        return {};
    QString replaced = text;
    return replaced.replace(userPart, QLatin1Char(':') + marker + QLatin1Char('@'));
}

inline const QString PasswordMarker = QStringLiteral("Zq8xPw1KmR");

} // namespace oncefuzz
