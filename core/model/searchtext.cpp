#include "model/searchtext.h"

namespace once {

EventSearch EventSearch::parse(const QString &text)
{
    const QString trimmed = text.trimmed();
    if (trimmed.isEmpty())
        return {};
    if (trimmed.startsWith(QLatin1String("body:"))) {
        const QString body = trimmed.mid(5).trimmed();
        return body.isEmpty() ? EventSearch{} : EventSearch{Kind::Body, body};
    }
    if (trimmed.endsWith(QLatin1Char('*')) && trimmed.size() > 1)
        return {Kind::Prefix, trimmed.chopped(1)};
    return {Kind::Exact, trimmed};
}

} // namespace once
