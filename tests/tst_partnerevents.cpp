// What happened after the provider: a real `once serve --partners FILE` takes each
// provider's delivery events at POST /v1/partners/NAME/events, checks the signature the
// provider documents, and records each event once in its key's history; a delivered event
// settles a key held in doubt. The sends are real (a worker against partner simulators),
// the events are built by the simulator's imitation of each provider from the request the
// profile really sent, and posted over real HTTP.
#include "deliveryharness.h"
#include "httptesting.h"
#include "partners/partnerevents.h"
#include "partners/partnerprofile.h"
#include "sim/partnersimulator.h"
#include "sim/providerimitation.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

namespace {

// Every partner of the suite's partners file: its name (and route), profile and the
// destination its provider takes.
struct Provider
{
    QString name;
    QString profile;
    QString destination;
};

const QList<Provider> &providers()
{
    static const QList<Provider> list{
        {QStringLiteral("pm"), QStringLiteral("postmark"), QStringLiteral("ann@example.com")},
        {QStringLiteral("rs"), QStringLiteral("resend"), QStringLiteral("bob@example.com")},
        {QStringLiteral("sg"), QStringLiteral("sendgrid"), QStringLiteral("cy@example.com")},
        {QStringLiteral("mg"), QStringLiteral("mailgun"), QStringLiteral("dee@example.com")},
        {QStringLiteral("tw"), QStringLiteral("twilio"), QStringLiteral("+15550001234")},
        {QStringLiteral("wh"), QStringLiteral("webhook"), QStringLiteral("+15550004321")},
    };
    return list;
}

const Provider &providerNamed(const QString &name)
{
    for (const Provider &provider : providers()) {
        if (provider.name == name)
            return provider;
    }
    qFatal("no provider %s", qPrintable(name));
}

// The URL Twilio is told to post to, and signs: serve may sit behind a proxy.
const QString TwilioEventsUrl = QStringLiteral("https://once.example.com/v1/partners/tw/events");

} // namespace

class PartnerEventsTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void eachProviderIsCheckedAsItSigns_data();
    void eachProviderIsCheckedAsItSigns();
    void aDeliveredEventSettlesAKeyInDoubt_data();
    void aDeliveredEventSettlesAKeyInDoubt();
    void whatIsNotAnEventIsAnsweredPlainly();
    void workerPartnerSimAndServeEndToEnd();

private:
    void writeSecret(const QString &name, const QByteArray &secret);
    QByteArray partnersJson(const QHash<QString, quint16> &ports) const;
    QString writeFile(const QString &name, const QByteArray &content) const;
    // One reminder for the provider's channel, enqueued; its line and send key.
    std::pair<QByteArray, QByteArray> enqueueOne(const Provider &provider, const QString &suffix = {});
    bool runWorker(const QString &partnersFile);
    bool startServe(const QString &partnersFile);
    // The event the provider would post for the first message it accepted, built by its
    // imitation from the request the profile sends for this reminder line.
    SimEvent eventFor(const Provider &provider, const QByteArray &reminderLine, bool bounce) const;
    // Signs (unless secret is empty) and posts; tamper changes the body after signing.
    HttpResult post(const Provider &provider, SimEvent event, const QByteArray &secret, qint64 signedAtMs,
                    bool tamper = false);
    QByteArray rightSecret(const Provider &provider) const;
    QByteArray wrongSecret(const Provider &provider) const;
    QJsonArray partnerEvents(const QByteArray &key);
    QString ledgerState(const QByteArray &key);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
    QHash<QString, std::shared_ptr<PartnerSimulator>> m_sims;
    QString m_partnersFile;
    quint16 m_servePort = 0;
    std::pair<QByteArray, QByteArray> m_sendgridKeys; // private, public (base64 DER)
    std::unique_ptr<HttpClient> m_http;
};

void PartnerEventsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
    m_sendgridKeys = eventsignatures::newEcdsaKeyPair();
    QVERIFY(!m_sendgridKeys.first.isEmpty() && !m_sendgridKeys.second.isEmpty());
}

void PartnerEventsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    m_http = std::make_unique<HttpClient>();
    const auto initialised = m_once->run({QStringLiteral("init")});
    QVERIFY2(initialised.exitedWith(0), initialised.describe().constData());
    writeSecret(QStringLiteral("token"), "provider-api-token");
    writeSecret(QStringLiteral("pm-events"), "pm-events-password");
    writeSecret(QStringLiteral("rs-events"), rightSecret(providerNamed(QStringLiteral("rs"))));
    writeSecret(QStringLiteral("wh-events"), rightSecret(providerNamed(QStringLiteral("wh"))));
    writeSecret(QStringLiteral("mg-events"), rightSecret(providerNamed(QStringLiteral("mg"))));
    QHash<QString, quint16> ports;
    for (const Provider &provider : providers()) {
        PartnerFaults faults;
        faults.idempotent = false;
        auto sim = std::make_shared<PartnerSimulator>(faults);
        QVERIFY(sim->setProvider(provider.profile));
        QString error;
        QVERIFY2(sim->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
        ports.insert(provider.name, sim->port());
        m_sims.insert(provider.name, sim);
    }
    m_partnersFile = writeFile(QStringLiteral("partners.json"), partnersJson(ports));
    QVERIFY(startServe(m_partnersFile));
}

void PartnerEventsTest::cleanup()
{
    m_once.reset();
    m_sims.clear();
    m_http.reset();
    m_dir.reset();
}

void PartnerEventsTest::writeSecret(const QString &name, const QByteArray &secret)
{
    writeFile(name, secret + '\n');
}

QString PartnerEventsTest::writeFile(const QString &name, const QByteArray &content) const
{
    const QString path = m_dir->filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(content) != content.size())
        qWarning("cannot write %s", qPrintable(path));
    return path;
}

QByteArray PartnerEventsTest::partnersJson(const QHash<QString, quint16> &ports) const
{
    const auto url = [&ports](const QString &name) {
        return QStringLiteral("http://127.0.0.1:%1").arg(ports.value(name, 9));
    };
    const QString token = QStringLiteral("file:") + m_dir->filePath(QStringLiteral("token"));
    const QString mail =
        QStringLiteral(R"("token": "%1", "from": "reminders@example.com", "subject": "Reminder")").arg(token);
    return QStringLiteral(R"({"partners": {
        "pm": {"profile": "postmark", "url": "%1", %2, "events_user": "hooks", "events_password": "file:%3"},
        "rs": {"profile": "resend", "url": "%4", %2, "events_secret": "file:%5"},
        "sg": {"profile": "sendgrid", "url": "%6", %2, "events_public_key": "%7"},
        "tw": {"profile": "twilio", "url": "%8", "account": "AC0123", "token": "%9", "from": "+15550000000",
               "events_url": "%10"},
        "wh": {"profile": "webhook", "url": "%11/reminders", "events_secret": "file:%12"},
        "mg": {"profile": "mailgun", "url": "%13", %2, "domain": "mg.example.com", "events_secret": "file:%14"}
    }, "routes": {"pm": "pm", "rs": "rs", "sg": "sg", "tw": "tw", "wh": "wh", "mg": "mg"}})")
        .arg(url(QStringLiteral("pm")), mail, m_dir->filePath(QStringLiteral("pm-events")),
             url(QStringLiteral("rs")), m_dir->filePath(QStringLiteral("rs-events")),
             url(QStringLiteral("sg")), QString::fromLatin1(m_sendgridKeys.second), url(QStringLiteral("tw")),
             token)
        .arg(TwilioEventsUrl, url(QStringLiteral("wh")), m_dir->filePath(QStringLiteral("wh-events")))
        .arg(url(QStringLiteral("mg")), m_dir->filePath(QStringLiteral("mg-events")))
        .toUtf8();
}

std::pair<QByteArray, QByteArray> PartnerEventsTest::enqueueOne(const Provider &provider,
                                                                const QString &suffix)
{
    const QString userId = QStringLiteral("user-") + provider.name;
    const QString reminderId = QStringLiteral("rem-") + provider.name + suffix;
    const QString scheduledAt = QStringLiteral("2026-12-07T09:00:00Z");
    const QByteArray line =
        QJsonDocument(QJsonObject{{QStringLiteral("user_id"), userId},
                                  {QStringLiteral("reminder_id"), reminderId},
                                  {QStringLiteral("scheduled_at"), scheduledAt},
                                  {QStringLiteral("destination"), provider.destination},
                                  {QStringLiteral("channel"), provider.name},
                                  {QStringLiteral("event_id"), QString(QStringLiteral("evt-") + reminderId)},
                                  {QStringLiteral("body"), QStringLiteral("Your appointment is tomorrow")}})
            .toJson(QJsonDocument::Compact);
    const QString path = writeFile(reminderId + QStringLiteral(".jsonl"), line + '\n');
    const auto enqueue = m_once->run({QStringLiteral("enqueue"), path});
    if (!enqueue.exitedWith(0))
        qWarning("%s", enqueue.describe().constData());
    return {line, makeSendKey(userId, reminderId, scheduledAt)};
}

bool PartnerEventsTest::runWorker(const QString &partnersFile)
{
    const auto worker = m_once->waitFor(m_once->start({QStringLiteral("worker"), QStringLiteral("--partners"),
                                                       partnersFile, QStringLiteral("--until-idle")}),
                                        WorkerTimeoutMs);
    if (!worker.exitedWith(0))
        qWarning("%s", worker.describe().constData());
    return worker.exitedWith(0);
}

bool PartnerEventsTest::startServe(const QString &partnersFile)
{
    m_servePort = m_once->startServe({QStringLiteral("--partners"), partnersFile});
    return m_servePort != 0;
}

SimEvent PartnerEventsTest::eventFor(const Provider &provider, const QByteArray &reminderLine,
                                     bool bounce) const
{
    QFile file(m_partnersFile);
    file.open(QIODevice::ReadOnly);
    QString error;
    const auto config = parsePartners(file.readAll(), &error);
    if (!config)
        qFatal("the suite's partners file: %s", qPrintable(error));
    const auto reminder = parseReminder(reminderLine).reminder;
    const auto request =
        partnerProfile(provider.profile)->sendRequest(*config->find(provider.name), *reminder, &error);
    if (!request)
        qFatal("no send request: %s", qPrintable(error));
    SimRequest send{request->method, request->url.path(QUrl::FullyEncoded).toUtf8(),
                    request->url.query(QUrl::FullyEncoded).toUtf8(), request->headers, request->body};
    // The simulator numbers the messages it accepts from 1: this is the first of its own.
    return *providerImitation(provider.profile)
                ->deliveryEvent("1", send, bounce, QDateTime::currentMSecsSinceEpoch());
}

HttpResult PartnerEventsTest::post(const Provider &provider, SimEvent event, const QByteArray &secret,
                                   qint64 signedAtMs, bool tamper)
{
    const QByteArray query = event.query.isEmpty() ? QByteArray() : '?' + event.query;
    if (!secret.isEmpty())
        providerImitation(provider.profile)
            ->signEvent(event, TwilioEventsUrl.toUtf8() + query, secret, signedAtMs);
    if (tamper)
        event.body += provider.profile == QLatin1String("twilio") ? QByteArray("&Extra=1") : QByteArray(" ");
    HttpRequest request;
    request.url = QUrl(QStringLiteral("http://127.0.0.1:%1/v1/partners/%2/events%3")
                           .arg(m_servePort)
                           .arg(provider.name, QString::fromLatin1(query)),
                       QUrl::StrictMode);
    request.headers = {{"Content-Type", event.contentType}};
    request.headers.append(event.headers);
    request.body = event.body;
    return exchange(*m_http, request);
}

QByteArray PartnerEventsTest::rightSecret(const Provider &provider) const
{
    if (provider.profile == QLatin1String("postmark"))
        return "hooks:pm-events-password";
    if (provider.profile == QLatin1String("resend"))
        return "whsec_" + QByteArray("resend-signing-key-0123456789").toBase64();
    if (provider.profile == QLatin1String("sendgrid"))
        return m_sendgridKeys.first;
    if (provider.profile == QLatin1String("twilio"))
        return "provider-api-token";
    if (provider.profile == QLatin1String("mailgun"))
        return "mailgun-http-webhook-signing-key";
    return "webhook-events-secret";
}

QByteArray PartnerEventsTest::wrongSecret(const Provider &provider) const
{
    if (provider.profile == QLatin1String("postmark"))
        return "hooks:not-the-password";
    if (provider.profile == QLatin1String("resend"))
        return "whsec_" + QByteArray("another-signing-key-987654").toBase64();
    if (provider.profile == QLatin1String("sendgrid"))
        return eventsignatures::newEcdsaKeyPair().first;
    return "not-the-secret";
}

QJsonArray PartnerEventsTest::partnerEvents(const QByteArray &key)
{
    const auto history =
        m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    QJsonArray rows;
    for (const QJsonValue &row :
         QJsonDocument::fromJson(history.out).object().value(QLatin1String("attempts")).toArray()) {
        if (row.toObject().value(QLatin1String("step")).toString() == QLatin1String("partner-event"))
            rows.append(row);
    }
    return rows;
}

QString PartnerEventsTest::ledgerState(const QByteArray &key)
{
    const auto history =
        m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    return QJsonDocument::fromJson(history.out).object().value(QLatin1String("state")).toString();
}

void PartnerEventsTest::eachProviderIsCheckedAsItSigns_data()
{
    QTest::addColumn<QString>("name");
    for (const Provider &provider : providers())
        QTest::newRow(qPrintable(provider.profile)) << provider.name;
}

// A send the provider accepted; then its delivered event, signed as the provider signs,
// posted twice as a provider retries: one history row. Unsigned, signed with another
// secret, changed after signing (where the scheme covers the body) or stale (where it has a
// time): 401 and nothing more in the history.
void PartnerEventsTest::eachProviderIsCheckedAsItSigns()
{
    QFETCH(QString, name);
    const Provider &provider = providerNamed(name);
    const auto [line, key] = enqueueOne(provider);
    QVERIFY(runWorker(m_partnersFile));
    QCOMPARE(ledgerState(key), QStringLiteral("applied"));
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const SimEvent delivered = eventFor(provider, line, false);

    const HttpResult unsignedPost = post(provider, delivered, {}, now);
    QVERIFY2(unsignedPost.httpStatus == 401, unsignedPost.body.constData());
    const HttpResult wrong = post(provider, delivered, wrongSecret(provider), now);
    QVERIFY2(wrong.httpStatus == 401, wrong.body.constData());
    QVERIFY2(!wrong.body.contains(rightSecret(provider)) && !wrong.body.contains("pm-events-password"),
             wrong.body.constData());
    // Postmark's basic auth does not cover the body, nor Mailgun's signature its
    // event-data: a body changed on the way passes (Mailgun's replays are below).
    if (provider.profile != QLatin1String("postmark") && provider.profile != QLatin1String("mailgun")) {
        const HttpResult tampered = post(provider, delivered, rightSecret(provider), now, true);
        QVERIFY2(tampered.httpStatus == 401, tampered.body.constData());
    }
    if (provider.profile == QLatin1String("resend") || provider.profile == QLatin1String("webhook")) {
        const HttpResult stale = post(provider, delivered, rightSecret(provider), now - 6 * 60 * 1000);
        QVERIFY2(stale.httpStatus == 401, stale.body.constData());
    }
    QCOMPARE(partnerEvents(key).size(), 0);

    const HttpResult first = post(provider, delivered, rightSecret(provider), now);
    QVERIFY2(first.httpStatus == 200, first.body.constData());
    QCOMPARE(QJsonDocument::fromJson(first.body).object().value(QLatin1String("recorded")).toInt(), 1);
    const HttpResult again = post(provider, delivered, rightSecret(provider), now);
    QVERIFY2(again.httpStatus == 200, again.body.constData());
    QCOMPARE(QJsonDocument::fromJson(again.body).object().value(QLatin1String("duplicates")).toInt(), 1);
    if (provider.profile == QLatin1String("mailgun")) {
        // The same signature (timestamp and token) over other event-data: a replay.
        SimEvent replay = delivered;
        providerImitation(provider.profile)->signEvent(replay, {}, rightSecret(provider), now);
        replay.body.replace("mgev1d", "mgev9d");
        const HttpResult replayed = post(provider, replay, {}, now);
        QVERIFY2(replayed.httpStatus == 200, replayed.body.constData());
        QCOMPARE(QJsonDocument::fromJson(replayed.body).object().value(QLatin1String("duplicates")).toInt(), 1);
    }
    const QJsonArray rows = partnerEvents(key);
    QCOMPARE(rows.size(), 1);
    const QJsonObject row = rows.first().toObject();
    QCOMPARE(row.value(QLatin1String("outcome")).toString(), QStringLiteral("delivered"));
    QCOMPARE(row.value(QLatin1String("partner")).toString(), provider.name);
    QCOMPARE(row.value(QLatin1String("partner_profile")).toString(), provider.profile);
    const QString providerName = partnerProfile(provider.profile)->name();
    QVERIFY2(row.value(QLatin1String("error"))
                 .toString()
                 .startsWith(QStringLiteral("delivered at %1 (%2) at ").arg(providerName, provider.name)),
             qPrintable(row.value(QLatin1String("error")).toString()));
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(key)});
    QVERIFY2(history.out.contains("partner-event delivered"), history.out.constData());
    QCOMPARE(ledgerState(key), QStringLiteral("applied"));
}

void PartnerEventsTest::aDeliveredEventSettlesAKeyInDoubt_data()
{
    QTest::addColumn<QString>("name");
    QTest::newRow("postmark") << QStringLiteral("pm");
    QTest::newRow("twilio") << QStringLiteral("tw");
    QTest::newRow("sendgrid") << QStringLiteral("sg");
    QTest::newRow("mailgun") << QStringLiteral("mg");
}

// The provider acts and its answer is lost: a provider without idempotency holds the key in
// doubt. Its delivered event settles the key applied (the history says so); a bounce that
// comes after it is told in the history and unsettles nothing.
void PartnerEventsTest::aDeliveredEventSettlesAKeyInDoubt()
{
    QFETCH(QString, name);
    const Provider &provider = providerNamed(name);
    PartnerFaults dropping = m_sims.value(name)->profile();
    dropping.dropAfterAcceptRate = 1;
    m_sims.value(name)->setProfile(dropping);
    const auto [line, key] = enqueueOne(provider);
    QVERIFY(runWorker(m_partnersFile));
    QCOMPARE(ledgerState(key), QStringLiteral("in_doubt"));
    const qint64 now = QDateTime::currentMSecsSinceEpoch();

    const HttpResult delivered = post(provider, eventFor(provider, line, false), rightSecret(provider), now);
    QVERIFY2(delivered.httpStatus == 200, delivered.body.constData());
    QCOMPARE(QJsonDocument::fromJson(delivered.body).object().value(QLatin1String("settled")).toInt(), 1);
    QCOMPARE(ledgerState(key), QStringLiteral("applied"));
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), 0);
    const HttpResult bounced = post(provider, eventFor(provider, line, true), rightSecret(provider), now);
    QVERIFY2(bounced.httpStatus == 200, bounced.body.constData());
    QCOMPARE(ledgerState(key), QStringLiteral("applied"));
    const QJsonArray rows = partnerEvents(key);
    QCOMPARE(rows.size(), 2);
    QVERIFY2(rows.at(0)
                 .toObject()
                 .value(QLatin1String("error"))
                 .toString()
                 .contains(QLatin1String("settled applied (it was in doubt)")),
             qPrintable(rows.at(0).toObject().value(QLatin1String("error")).toString()));
    QCOMPARE(rows.at(1).toObject().value(QLatin1String("outcome")).toString(), QStringLiteral("bounced"));
    QCOMPARE(m_sims.value(name)->stats().duplicateEffects, 0);
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    const QString verdict = QJsonDocument::fromJson(history.out).object().value(QLatin1String("verdict")).toString();
    QVERIFY2(verdict.startsWith(QLatin1String("Delivered once, on the provider's word: its delivery event at "))
                 && verdict.contains(QLatin1String("; afterwards the provider reported: bounced at ")),
             qPrintable(verdict));
}

// A partner this server does not know, a body over the limit, a signed body that is not
// the provider's shape, and an event for a key the ledger never had.
void PartnerEventsTest::whatIsNotAnEventIsAnsweredPlainly()
{
    const Provider &webhook = providerNamed(QStringLiteral("wh"));
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    SimEvent event;
    event.body =
        R"({"events": [{"key": "u:nobody:2026-12-07T09:00:00Z", "kind": "delivered", "id": "ev-1"}]})";
    const HttpResult unknownKey = post(webhook, event, rightSecret(webhook), now);
    QVERIFY2(unknownKey.httpStatus == 200, unknownKey.body.constData());
    QCOMPARE(QJsonDocument::fromJson(unknownKey.body).object().value(QLatin1String("unknown")).toInt(), 1);

    Provider stranger = webhook;
    stranger.name = QStringLiteral("nobody");
    const HttpResult unknownPartner = post(stranger, event, rightSecret(webhook), now);
    QVERIFY2(unknownPartner.httpStatus == 404, unknownPartner.body.constData());

    SimEvent notJson;
    notJson.body = "{\"events\": [";
    const HttpResult malformed = post(webhook, notJson, rightSecret(webhook), now);
    QVERIFY2(malformed.httpStatus == 400, malformed.body.constData());
    QVERIFY(!malformed.body.contains('\n'));

    SimEvent huge;
    huge.body = R"({"events": [], "pad": ")" + QByteArray(2 * 1024 * 1024, 'x') + R"("})";
    const HttpResult tooLarge = post(webhook, huge, rightSecret(webhook), now);
    QVERIFY2(tooLarge.httpStatus == 413, tooLarge.body.left(300).constData());
}

// `once worker` sends through `once partner-sim --profile postmark --events-to` (a
// process), which posts Postmark's delivery and bounce events to `once serve`, as Postmark
// would: the history shows each, and a bounce leaves its key applied. A simulator told to
// post unsigned events is refused, and nothing is recorded.
void PartnerEventsTest::workerPartnerSimAndServeEndToEnd()
{
    const Provider &postmark = providerNamed(QStringLiteral("pm"));
    const QString eventsUrl = QStringLiteral("http://127.0.0.1:%1/v1/partners/pm/events").arg(m_servePort);
    writeSecret(QStringLiteral("pm-sim-events"), rightSecret(postmark));
    const quint16 simPort =
        m_once->startPartnerSim({QStringLiteral("--profile"), QStringLiteral("postmark"),
                                 QStringLiteral("--events-to"), eventsUrl, QStringLiteral("--events-secret"),
                                 QStringLiteral("file:") + m_dir->filePath(QStringLiteral("pm-sim-events")),
                                 QStringLiteral("--bounce-every"), QStringLiteral("2")});
    QVERIFY(simPort != 0);
    QHash<QString, quint16> ports;
    for (const Provider &provider : providers())
        ports.insert(provider.name, m_sims.value(provider.name)->port());
    ports.insert(QStringLiteral("pm"), simPort);
    const QString workerPartners = writeFile(QStringLiteral("worker-partners.json"), partnersJson(ports));
    QList<QByteArray> keys;
    for (int i = 0; i < 4; ++i)
        keys.append(enqueueOne(postmark, QString::number(i)).second);
    QVERIFY(runWorker(workerPartners));
    int delivered = 0;
    int bounced = 0;
    for (const QByteArray &key : keys) {
        QTRY_VERIFY_WITH_TIMEOUT(partnerEvents(key).size() == 1, 10000);
        const QJsonObject row = partnerEvents(key).first().toObject();
        const QString outcome = row.value(QLatin1String("outcome")).toString();
        delivered += outcome == QLatin1String("delivered") ? 1 : 0;
        bounced += outcome == QLatin1String("bounced") ? 1 : 0;
        QVERIFY2(row.value(QLatin1String("error"))
                     .toString()
                     .startsWith(outcome + QStringLiteral(" at Postmark (pm) at ")),
                 qPrintable(row.value(QLatin1String("error")).toString()));
        QCOMPARE(ledgerState(key), QStringLiteral("applied"));
    }
    QCOMPARE(delivered, 2);
    QCOMPARE(bounced, 2);
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(keys.first())});
    QVERIFY2(history.out.contains("delivered at Postmark (pm) at ") ||
                 history.out.contains("bounced at Postmark (pm) at "),
             history.out.constData());

    // The same, unsigned: every event is refused, none recorded.
    const quint16 unsignedPort = m_once->startPartnerSim(
        {QStringLiteral("--profile"), QStringLiteral("postmark"), QStringLiteral("--events-to"), eventsUrl,
         QStringLiteral("--events-unsigned")});
    QVERIFY(unsignedPort != 0);
    ports.insert(QStringLiteral("pm"), unsignedPort);
    writeFile(QStringLiteral("worker-partners.json"), partnersJson(ports));
    const QByteArray unsignedKey = enqueueOne(postmark, QStringLiteral("-unsigned")).second;
    QVERIFY(runWorker(workerPartners));
    QCOMPARE(ledgerState(unsignedKey), QStringLiteral("applied"));
    HttpRequest stats;
    stats.method = "GET";
    stats.url = localUrl(unsignedPort, QStringLiteral("/stats"));
    QTRY_VERIFY_WITH_TIMEOUT(QJsonDocument::fromJson(exchange(*m_http, stats).body)
                                     .object()
                                     .value(QLatin1String("events_refused"))
                                     .toInt() == 1,
                             10000);
    QCOMPARE(partnerEvents(unsignedKey).size(), 0);
}

QTEST_MAIN(PartnerEventsTest)
#include "tst_partnerevents.moc"
