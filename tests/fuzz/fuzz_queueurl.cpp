// A queue URL (--queue, ONCE_QUEUE, the console's broker dialog): QueueLocation::parse
// either refuses it in one line that never repeats the password, or accepts it with a
// plain queue name, a management URL without credentials, and a display name that does
// not depend on the password and reads back as the same queue.
#include "fuzzcheck.h"
#include "queuelocation.h"

using namespace once;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QString text = QString::fromUtf8(oncefuzz::bytes(data, size));
    // The same URL with a marker for a password: nothing once says may hold the marker.
    if (const QString marked = oncefuzz::withPasswordMarker(text, oncefuzz::PasswordMarker); !marked.isEmpty()) {
        QString error;
        const auto location = QueueLocation::parse(marked, &error);
        FUZZ_CHECK(!error.contains(oncefuzz::PasswordMarker), error);
        FUZZ_CHECK(!location || !location->displayName().contains(oncefuzz::PasswordMarker), location->displayName());
    }
    QString error;
    const auto location = QueueLocation::parse(text, &error);
    if (!location) {
        FUZZ_CHECK(oncefuzz::isOneLine(error), error);
        return 0;
    }
    FUZZ_CHECK(error.isEmpty(), error);
    FUZZ_CHECK(!location->host.isEmpty() && !location->name.isEmpty(), text);
    FUZZ_CHECK(location->managementUrl.userInfo().isEmpty(), location->managementUrl.toString());
    FUZZ_CHECK(!location->deadLetterName().isEmpty() && location->deadLetterName() != location->name, location->name);
    QueueLocation other = *location;
    other.password = QStringLiteral("other");
    const QString shown = location->displayName();
    FUZZ_CHECK(shown == other.displayName(), shown);
    const auto again = QueueLocation::parse(shown, &error);
    FUZZ_CHECK(again, shown + QStringLiteral(": ") + error);
    FUZZ_CHECK(again->kind == location->kind && again->host == location->host && again->port == location->port
                   && again->user == location->user && again->vhost == location->vhost
                   && again->database == location->database && again->name == location->name,
               shown);
    return 0;
}
