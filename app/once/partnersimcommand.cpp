#include "cli.h"

#include "http/pemfiles.h"
#include "partners/partnersettings.h"
#include "sim/partnersimulator.h"
#include "sim/providerimitation.h"

#include <QSslConfiguration>
#include <QSslSocket>

#include <QCoreApplication>

#include <cstdio>

namespace once::cli {

namespace {

QStringList hostileNames()
{
    QStringList names;
    for (const HostileModeInfo &info : hostileModes())
        names << info.name;
    return names;
}

QString hostileHelp()
{
    QString help = QStringLiteral("Misbehave on purpose, to rehearse a hostile partner: none (default)");
    for (const HostileModeInfo &info : hostileModes())
        help += QStringLiteral("; ") + info.name + QStringLiteral(": ") + info.description;
    return help + QLatin1Char('.');
}

} // namespace

int runPartnerSim(const QStringList &arguments)
{
    Command command(QStringLiteral("partner-sim"),
                    QStringLiteral("A partner HTTP API on 127.0.0.1 for demos, tests and outage rehearsals. As a "
                                   "webhook (the default), POST /reminders applies one effect per Idempotency-Key; "
                                   "--profile imitates a provider's own API instead (docs/partners.md). GET /stats "
                                   "counts the effects, GET /effects counts them per key."),
                    {});
    auto &parser = command.parser();
    parser.addOptions({
        {QStringLiteral("profile"), QStringLiteral("The provider to imitate: ") + providerImitationIds().join(QLatin1String(", ")) + QStringLiteral("."), QStringLiteral("NAME"), QStringLiteral("webhook")},
        {QStringLiteral("token"), QStringLiteral("The credential the provider expects (else $ONCE_SIM_TOKEN; unset: any non-empty one, and for the webhook none)."), QStringLiteral("TOKEN")},
        {QStringLiteral("port"), QStringLiteral("Port to listen on (0: any free one, printed)."), QStringLiteral("P"), QStringLiteral("8080")},
        {QStringLiteral("fail-rate"), QStringLiteral("Share of requests answered 503."), QStringLiteral("R"), QStringLiteral("0")},
        {QStringLiteral("throttle-rate"), QStringLiteral("Share of requests answered 429."), QStringLiteral("R"), QStringLiteral("0")},
        {QStringLiteral("rate-limit"), QStringLiteral("Admit at most N send requests a second (a token bucket holding N), answering the others 429 with Retry-After: 1 without acting; /stats counts both (0: no limit)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("retry-after"), QStringLiteral("Retry-After seconds on a 429."), QStringLiteral("S"), QStringLiteral("1")},
        {QStringLiteral("latency-ms"), QStringLiteral("Time to answer each request."), QStringLiteral("MS"), QStringLiteral("0")},
        {QStringLiteral("outage-after"), QStringLiteral("Start an outage after N requests (0: never)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("outage-seconds"), QStringLiteral("How long the outage lasts."), QStringLiteral("S"), QStringLiteral("0")},
        {QStringLiteral("outage-every"), QStringLiteral("Repeat the outage every S seconds (0: once)."), QStringLiteral("S"), QStringLiteral("0")},
        {QStringLiteral("refuse-status"), QStringLiteral("Answer every request with this 4xx status without acting (401: a revoked token; 0: never)."), QStringLiteral("STATUS"), QStringLiteral("0")},
        {QStringLiteral("drop-after-accept-rate"), QStringLiteral("Share of requests applied and then left without an answer."), QStringLiteral("R"), QStringLiteral("0")},
        {QStringLiteral("no-idempotency"), QStringLiteral("Ignore Idempotency-Key: every request is an effect.")},
        {QStringLiteral("key-window-ms"), QStringLiteral("How long an idempotency key is kept: a repeat after this is a new request (default: the provider's, Resend 24 h, the webhook forever; 0: forever)."), QStringLiteral("MS")},
        {QStringLiteral("hostile"), hostileHelp(), QStringLiteral("MODE"), QStringLiteral("none")},
        {QStringLiteral("hostile-count"), QStringLiteral("Misbehave only for the first N requests (0: for all)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("events-to"), QStringLiteral("After accepting a send, post the provider's delivery event for it to this URL (once serve's /v1/partners/NAME/events), signed as the provider signs."), QStringLiteral("URL")},
        {QStringLiteral("events-secret"), QStringLiteral("What the events are signed with, as env:NAME or file:PATH: Resend's whsec_..., Postmark's USER:PASSWORD, SendGrid's private key (base64 DER), the webhook's secret; Twilio's is --token."), QStringLiteral("REF")},
        {QStringLiteral("events-unsigned"), QStringLiteral("Post the events without a signature (a fault: the receiver must refuse them).")},
        {QStringLiteral("bounce-every"), QStringLiteral("Every Nth accepted send bounces instead of being delivered (0: none)."), QStringLiteral("N"), QStringLiteral("0")},
        {QStringLiteral("tls-cert"), QStringLiteral("Serve HTTPS with this PEM certificate (and chain)."), QStringLiteral("FILE")},
        {QStringLiteral("tls-key"), QStringLiteral("The PEM private key of --tls-cert."), QStringLiteral("FILE")},
        {QStringLiteral("tls-client-ca"), QStringLiteral("Mutual TLS: serve only clients with a certificate these PEM CAs signed."), QStringLiteral("FILE")},
    });
    if (const int exit = command.parse(arguments); exit >= 0)
        return exit;
    const auto port = command.integer(QStringLiteral("port"), 0, 65535);
    const auto failRate = command.rate(QStringLiteral("fail-rate"));
    const auto throttleRate = command.rate(QStringLiteral("throttle-rate"));
    const auto retryAfter = command.integer(QStringLiteral("retry-after"), 0, 86400);
    const auto latency = command.integer(QStringLiteral("latency-ms"), 0, 600000);
    const auto outageAfter = command.integer(QStringLiteral("outage-after"), 0, 1LL << 40);
    const auto outageSeconds = command.integer(QStringLiteral("outage-seconds"), 0, 86400);
    const auto outageEvery = command.integer(QStringLiteral("outage-every"), 0, 86400);
    const auto dropRate = command.rate(QStringLiteral("drop-after-accept-rate"));
    const auto hostileCount = command.integer(QStringLiteral("hostile-count"), 0, 1LL << 30);
    const auto refuseStatus = command.integer(QStringLiteral("refuse-status"), 0, 499);
    const auto rateLimit = command.integer(QStringLiteral("rate-limit"), 0, 1000000);
    std::optional<qint64> keyWindow = -1;
    if (parser.isSet(QStringLiteral("key-window-ms")))
        keyWindow = command.integer(QStringLiteral("key-window-ms"), 0, 30LL * 24 * 3600 * 1000);
    if (refuseStatus && *refuseStatus != 0 && *refuseStatus < 400)
        return command.usageError(QStringLiteral("--refuse-status must be 0 or a 4xx status"));
    if (!refuseStatus || !port || !failRate || !throttleRate || !retryAfter || !latency || !outageAfter || !outageSeconds || !outageEvery
        || !dropRate || !hostileCount || !keyWindow || !rateLimit)
        return Usage;
    const auto hostile = hostileModeFromName(parser.value(QStringLiteral("hostile")));
    if (!hostile)
        return command.usageError(QStringLiteral("--hostile must be none or one of: ") + hostileNames().join(QLatin1String(", ")));

    PartnerFaults profile;
    profile.failRate = *failRate;
    profile.throttleRate = *throttleRate;
    profile.retryAfterSeconds = int(*retryAfter);
    profile.latencyMs = int(*latency);
    profile.outageAfterRequests = int(*outageAfter);
    profile.outageSeconds = int(*outageSeconds);
    profile.outageEverySeconds = int(*outageEvery);
    profile.dropAfterAcceptRate = *dropRate;
    profile.refuseStatus = int(*refuseStatus);
    profile.idempotent = !parser.isSet(QStringLiteral("no-idempotency"));
    profile.keyWindowMs = *keyWindow;
    profile.hostile = *hostile;
    profile.hostileCount = int(*hostileCount);
    profile.rateLimitPerSecond = double(*rateLimit);
    PartnerSimulator simulator(profile);
    const QString provider = parser.value(QStringLiteral("profile"));
    if (!simulator.setProvider(provider))
        return command.usageError(QStringLiteral("--profile must be one of: ") + providerImitationIds().join(QLatin1String(", ")));
    // A token on the command line shows in ps; the environment does not.
    simulator.setExpectedToken(parser.isSet(QStringLiteral("token")) ? parser.value(QStringLiteral("token")).toUtf8()
                                                                     : qgetenv("ONCE_SIM_TOKEN"));
    QString error;
    if (parser.isSet(QStringLiteral("events-to"))) {
        SimEventsTarget events;
        events.url = QUrl(parser.value(QStringLiteral("events-to")), QUrl::StrictMode);
        if (!events.url.isValid() || (events.url.scheme() != QLatin1String("http") && events.url.scheme() != QLatin1String("https")))
            return command.usageError(QStringLiteral("--events-to must be an http:// or https:// URL"));
        const auto bounceEvery = command.integer(QStringLiteral("bounce-every"), 0, 1LL << 30);
        if (!bounceEvery)
            return Usage;
        events.bounceEvery = int(*bounceEvery);
        events.sign = !parser.isSet(QStringLiteral("events-unsigned"));
        if (provider == QLatin1String("twilio")) {
            events.secret = parser.isSet(QStringLiteral("token")) ? parser.value(QStringLiteral("token")).toUtf8()
                                                                  : qgetenv("ONCE_SIM_TOKEN");
        } else if (parser.isSet(QStringLiteral("events-secret"))) {
            const auto secret = resolveSecretReference(parser.value(QStringLiteral("events-secret")), &error);
            if (!secret)
                return command.usageError(QStringLiteral("--events-secret: ") + error);
            events.secret = *secret;
        }
        if (events.sign && events.secret.isEmpty())
            return command.usageError(provider == QLatin1String("twilio")
                                          ? QStringLiteral("--events-to for twilio signs with the auth token: give --token or ONCE_SIM_TOKEN")
                                          : QStringLiteral("--events-to needs --events-secret (or --events-unsigned)"));
        simulator.setEventsTarget(events);
    }
    const bool tls = parser.isSet(QStringLiteral("tls-cert")) || parser.isSet(QStringLiteral("tls-key"))
                     || parser.isSet(QStringLiteral("tls-client-ca"));
    if (tls) {
        if (!parser.isSet(QStringLiteral("tls-cert")) || !parser.isSet(QStringLiteral("tls-key")))
            return command.usageError(QStringLiteral("--tls-cert and --tls-key go together"));
        const auto chain = readPemCertificates(parser.value(QStringLiteral("tls-cert")), &error);
        if (!chain)
            return command.usageError(QStringLiteral("--tls-cert: ") + error);
        const auto key = readPemPrivateKey(parser.value(QStringLiteral("tls-key")), &error);
        if (!key)
            return command.usageError(QStringLiteral("--tls-key: ") + error);
        if (!QSslSocket::supportsSsl())
            return failure(QStringLiteral("TLS is not available in this build"));
        QSslConfiguration configuration = QSslConfiguration::defaultConfiguration();
        configuration.setLocalCertificateChain(*chain);
        configuration.setPrivateKey(*key);
        configuration.setPeerVerifyMode(QSslSocket::VerifyNone);
        if (parser.isSet(QStringLiteral("tls-client-ca"))) {
            const auto clientCas = readPemCertificates(parser.value(QStringLiteral("tls-client-ca")), &error);
            if (!clientCas)
                return command.usageError(QStringLiteral("--tls-client-ca: ") + error);
            configuration.setCaCertificates(*clientCas);
            configuration.setPeerVerifyMode(QSslSocket::VerifyPeer);
            // Refuse as a real TLS server does, with an alert in the handshake, rather
            // than by closing the connection once it is established.
            configuration.setHandshakeMustInterruptOnError(true);
            configuration.setMissingCertificateIsFatal(true);
        }
        simulator.setTlsConfiguration(configuration);
    }
    if (!simulator.listen(QHostAddress::LocalHost, quint16(*port), &error))
        return failure(error);
    // Scripts read this line to learn the port.
    if (provider == QLatin1String("webhook"))
        std::printf("partner simulator listening on %s://127.0.0.1:%u/reminders\n", tls ? "https" : "http",
                    unsigned(simulator.port()));
    else
        std::printf("partner simulator listening on %s://127.0.0.1:%u as %s (%s)\n", tls ? "https" : "http",
                    unsigned(simulator.port()), qPrintable(provider),
                    qPrintable(providerImitation(provider)->sendHelp()));
    std::fflush(stdout);
    watchTerminationSignals(&simulator, [] { QCoreApplication::exit(0); });
    return QCoreApplication::exec();
}

} // namespace once::cli
