#pragma once

#include <QString>
#include <QStringView>

namespace once {

// Text from outside (a message's field, part of a URL), made safe to quote in a one-line
// error: in double quotes, with '"' and '\' escaped, newline, return and tab as \n,
// \r, \t, other control characters, the line and paragraph separators and unpaired
// surrogates as \uXXXX, and cut after maxChars characters ("...").
QString quotedForError(QStringView text, qsizetype maxChars = 64);

// A server's own words (an error message, an answer's start) for a log line or an error:
// line breaks become spaces, other control characters '?', and more than maxChars
// characters are cut ("...").
QString asOneLine(QString text, qsizetype maxChars = 300);

} // namespace once
