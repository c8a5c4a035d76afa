#pragma once

#include <QByteArray>
#include <QLatin1StringView>
#include <QString>

#include <span>

namespace once {

// How deep arrays and objects may nest in a message. A reminder needs two levels; the
// bound keeps a hostile message from costing stack or time in any parser that reads it.
inline constexpr int MaxJsonDepth = 64;

// Checks that bytes are exactly one JSON text as RFC 8259 defines it, before anything
// reads them (readStrictJsonObject below reads a reminder's members in the same pass).
// Qt's parser, for one, is lenient where leniency changes meaning: it
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
//   - no number a 64-bit double cannot hold (one that overflows to infinity, or whose
//     non-zero digits round to zero: Qt's parser refuses such a text whole);
//   - at most MaxJsonDepth levels of nesting; nothing but whitespace after the value.
// A UTF-8 byte order mark at the very start is allowed, as RFC 8259 permits and Qt does.
// Returns an empty string when the text passes, else one line saying what is wrong and at
// which byte offset.
QString strictJsonProblem(const QByteArray &text);

// A member of a JSON object's top level, as readStrictJsonObject found it.
struct JsonMember
{
    enum class Kind
    {
        Absent,
        Null,
        String,
        Other
    };
    QLatin1StringView name; // asked for
    Kind kind = Kind::Absent;
    QString text = {}; // a string's text, escapes decoded
};

// The same check, and in the same pass the members named in `members` at the top level of
// the text's value, when that value is an object (*isObject). A reader that takes these
// needs no second parser, which would be another reading that could differ. The members
// are filled only when the text passes.
QString readStrictJsonObject(const QByteArray &text, std::span<JsonMember> members, bool *isObject);

} // namespace once
