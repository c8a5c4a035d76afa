#pragma once

#include <QByteArray>

#include <optional>

namespace once {

// Retry-After as seconds or an HTTP date (RFC 9110 10.2.3), in milliseconds from nowMs,
// capped at a day; nullopt when absent or unreadable. What a partner or a queue asks for.
std::optional<qint64> parseRetryAfterMs(const QByteArray &value, qint64 nowMs);

} // namespace once
