#pragma once

#include <QString>

namespace once {

// What a search box's text asks for, on the Events page, the Dead letters page and the
// command line alike: a whole value ("alice"), a prefix ("alice*") or text anywhere in the
// message ("body:dentist"). One reading for all, so that a search that finds no event
// finds the same message among the dead letters.
struct EventSearch
{
    enum class Kind
    {
        None,
        Exact,
        Prefix,
        Body
    };
    Kind kind = Kind::None;
    QString text; // without the "*" or "body:"

    static EventSearch parse(const QString &text);
};

} // namespace once
