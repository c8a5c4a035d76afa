#pragma once

#include <QString>
#include <QStringView>

namespace once {

// Text from outside (a message's field, part of a URL), made safe to quote in a one-line
// error: in double quotes, with '"' and '\' escaped, newline, return and tab as \n,
// \r, \t, other control characters, the line and paragraph separators and unpaired
// surrogates as \uXXXX, and cut after maxChars characters ("...").
QString quotedForError(QStringView text, qsizetype maxChars = 64);

} // namespace once
