#pragma once

#include "sim/hostileanswers.h"
#include "sim/shardedkeyhash.h"

#include <QHash>
#include <QHostAddress>
#include <QObject>
#include <QUrl>

#include <memory>

class QSslConfiguration;
class QTcpServer;

namespace once {

// How the simulated partner misbehaves. Rates are probabilities in [0, 1] per request.
struct PartnerFaults
{
    double failRate = 0.0;            // answer 503 without acting
    double throttleRate = 0.0;        // answer 429 with Retry-After without acting
    int retryAfterSeconds = 1;
    int latencyMs = 0;                // per request, without blocking other requests
    int failLatencyMs = 0;            // how long a fail-rate 503 takes (a partner timing out behind its load balancer)
    int outageAfterRequests = 0;      // 0: never; otherwise after this many requests...
    int outageSeconds = 0;            // ...answer 503 to everything for this long
    int outageEverySeconds = 0;       // 0: one outage; otherwise repeat this often after the first
    int refuseStatus = 0;             // 4xx: answer it to every request without acting (401: a revoked token)
    double dropAfterAcceptRate = 0.0; // apply the effect, then close the connection without answering
    bool idempotent = true;           // false: every request is an effect, Idempotency-Key ignored
    // How long a key is kept: a key first seen longer ago than this is a new request (its
    // effect counts again). -1: the provider's documented window (Resend: 24 h; the
    // webhook: forever); 0: forever.
    qint64 keyWindowMs = -1;
    HostileMode hostile = HostileMode::None; // misbehave on purpose (hostileanswers.h)...
    int hostileCount = 0;                    // ...for the first N requests to /reminders (0: for all)
    // Admit at most this many send requests a second (0: no limit), as a provider's rate
    // limiter does in front of everything else: a token bucket refilled at this rate and
    // holding at most this many; a request beyond it is answered 429 with Retry-After: 1
    // and does nothing.
    double rateLimitPerSecond = 0;
};

// Where the simulated provider posts delivery events after it accepts a send, as the real
// one calls the sender's webhook (docs/partners.md, "Delivery events").
struct SimEventsTarget
{
    QUrl url;              // empty: no events
    QByteArray secret;     // as the sender's partners file holds it (see ProviderImitation::signEvent)
    bool sign = true;      // false: posted unsigned, a fault that the receiver must refuse
    int bounceEvery = 0;   // every Nth accepted send bounces instead of being delivered (0: none)
};

struct PartnerStats
{
    qint64 requests = 0;          // send requests received (a webhook's POST /reminders)
    qint64 effects = 0;           // reminders actually "delivered" by the partner
    qint64 duplicateRequests = 0; // requests whose Idempotency-Key was seen before
    qint64 duplicateEffects = 0;  // effects on a key that already had one (only without idempotency)
    qint64 dropped = 0;           // connections closed after accepting, without an answer
    qint64 held = 0;              // requests waiting out the profile's latency now...
    qint64 peakHeld = 0;          // ...and the most at once: a client's real concurrency
    qint64 hostile = 0;           // requests answered the profile's hostile way
    qint64 eventsPosted = 0;      // delivery events posted to the events target...
    qint64 eventsAccepted = 0;    // ...answered 2xx...
    qint64 eventsRefused = 0;     // ...answered otherwise, or not at all
    qint64 rateLimited = 0;       // send requests refused by the rate limit (429)...
    qint64 admitted = 0;          // ...and those it let through
};

// A real HTTP/1.1 server on a loopback address standing in for an email/SMS provider.
// By default it imitates a webhook partner; setProvider() makes it imitate one provider's
// send call, authentication, errors and lookup instead (providerimitation.h), with effects
// counted by the key the request carried. As a webhook, POST /reminders applies one effect per Idempotency-Key and answers a repeated key with
// a replay of the first successful response (a 409 while the first is still in progress,
// a 422 when the body differs). GET /stats returns PartnerStats as JSON
// (requests, effects, duplicate_requests, duplicate_effects, dropped, peak_held, hostile,
// rate_limited, admitted, and as any partner may offer them to once bench --partner-url:
// posts, the requests again, and keys, the distinct Idempotency-Key values applied; and
// seconds: for each of the last seconds since it started, [second, send requests, of them
// rate-limited, effects], so that a test can see how a client paced itself);
// GET /effects returns {"<key>": count, ...}. Serves many connections at once.
class PartnerSimulator final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PartnerSimulator)

public:
    explicit PartnerSimulator(const PartnerFaults &profile = {}, QObject *parent = nullptr);
    ~PartnerSimulator() override;

    // Serves HTTPS instead of HTTP, with the configuration's certificate and key (and, if
    // it sets VerifyPeer, only to clients with a certificate its CAs signed). Before listen().
    void setTlsConfiguration(const QSslConfiguration &configuration);
    bool isTls() const { return m_tls; }
    // port 0 picks a free port. Returns false with errorText filled on failure.
    bool listen(const QHostAddress &address, quint16 port, QString *errorText = nullptr);
    quint16 port() const;

    // Imitates this provider (providerimitation.h: "webhook", the default, "resend",
    // "postmark", ...); false for an unknown one. Before listen().
    bool setProvider(QStringView id);
    QString provider() const;
    // The credential the provider's imitation expects; empty: any non-empty one (and,
    // for the webhook, none at all).
    void setExpectedToken(const QByteArray &token);
    // Posts a delivery event for every accepted send to the target.
    void setEventsTarget(const SimEventsTarget &target);

    PartnerFaults profile() const { return m_profile; }
    void setProfile(const PartnerFaults &profile);
    PartnerStats stats() const { return m_stats; }
    QHash<QByteArray, int> effectsByKey() const { return m_effectsByKey.toHash(); }

signals:
    void effectApplied(const QByteArray &idempotencyKey);

private:
    struct Private;
    friend struct Private;
    PartnerFaults m_profile;
    PartnerStats m_stats;
    ShardedKeyHash<int> m_effectsByKey;
    bool m_tls = false;
    std::unique_ptr<Private> d;
};

} // namespace once
