// A queue URL (--queue, ONCE_QUEUE, the console's broker dialog): QueueLocation::parse
// either refuses it in one line that never repeats the password, or accepts it with a
// plain queue name, a management URL without credentials, and a display name that does
// not depend on the password and reads back as the same queue.
#include "fuzzcheck.h"
#include "queues/queuebackend.h"
#include "queues/queuelocation.h"
#include "queues/rabbitmq/rabbitmqlocation.h"
#include "queues/redis/redislocation.h"

using namespace once;

// The registry as URLs see it: each backend's registration without its opener (which
// would bring its broker's client library), so parsing runs exactly as in once.
const QList<const QueueBackend *> &once::queueBackends()
{
    static const QueueBackend rabbitMq = rabbitMqUrlSyntax();
    static const QueueBackend redis = redisStreamsUrlSyntax();
    static const QList<const QueueBackend *> backends{&rabbitMq, &redis};
    return backends;
}

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
    if (location->backend->id == QLatin1String("rabbitmq")) {
        const QUrl management = rabbitMqDetails(*location).managementUrl;
        FUZZ_CHECK(management.userInfo().isEmpty(), management.toString());
    }
    FUZZ_CHECK(!location->deadLetterName().isEmpty() && location->deadLetterName() != location->name, location->name);
    QueueLocation other = *location;
    other.password = QStringLiteral("other");
    const QString shown = location->displayName();
    FUZZ_CHECK(shown == other.displayName(), shown);
    const auto again = QueueLocation::parse(shown, &error);
    FUZZ_CHECK(again, shown + QStringLiteral(": ") + error);
    FUZZ_CHECK(again->backend == location->backend && again->host == location->host && again->port == location->port
                   && again->user == location->user && again->name == location->name
                   && again->displayName() == shown,
               shown);
    return 0;
}
