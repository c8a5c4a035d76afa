#pragma once

#include <QByteArray>
#include <QString>

namespace once {

// How deep arrays and objects may nest in a message. A reminder needs two levels; the
// bound keeps a hostile message from costing stack or time in any parser that reads it.
inline constexpr int MaxJsonDepth = 64;

// Checks that bytes are exactly one JSON text as RFC 8259 defines it, before
// QJsonDocument reads them. Qt's parser is lenient where leniency changes meaning: it
// takes raw control characters inside strings, escapes such as \x41 and \', escapes of
// unpaired surrogates (which later become '?' or U+FFFD, so two different ids can meet),
// numbers such as "1." and ".5", and duplicate names in an object (it keeps the last, a
// partner may keep the first, so the ledger and the forwarded payload could disagree);
// and it drops a raw byte order mark that opens a string ("\uFEFFa" written raw reads
// as "a").
// This check refuses all of that, in any object at any depth (the payload is forwarded
// as it is):
//   - valid UTF-8 only (no overlong forms, no encoded surrogates, nothing past U+10FFFF);
//   - no raw control character (below U+0020) inside a string, no raw U+FEFF opening one
//     (escaped as \uFEFF it is kept, and allowed);
//   - escapes only as RFC 8259 lists them, a \uD800-style escape only as a proper pair;
//   - no name twice in one object (compared after decoding escapes);
//   - at most MaxJsonDepth levels of nesting; nothing but whitespace after the value.
// A UTF-8 byte order mark at the very start is allowed, as RFC 8259 permits and Qt does.
// Returns an empty string when the text passes, else one line saying what is wrong and at
// which byte offset.
QString strictJsonProblem(const QByteArray &text);

} // namespace once
