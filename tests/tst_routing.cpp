// Several partners behind one worker (--partners FILE): each reminder goes to the partner
// its channel is routed to and nowhere else, one partner's outage holds back only its own
// reminders, and a partners file that is almost right is refused with one line that never
// quotes a secret. Real `once` processes against two partner simulators; effects counted
// at each.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class RoutingTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void anOutageAtOnePartnerHoldsBackOnlyItsChannel();
    void aChannelWithoutARouteIsDeadLetteredNotSentElsewhere();
    void reconcileSettlesWhatThePartnerHas();
    void aWorkerReconcilesWhatIsLeftInDoubtAfterTheGracePeriod();
    void aPartnersFileThatIsAlmostRightIsRefused_data();
    void aPartnersFileThatIsAlmostRightIsRefused();

private:
    QString writePartnersFile(const QByteArray &json) const;
    QString url(const PartnerSimulator &partner) const
    {
        return QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port());
    }
    QByteArray twoPartners() const;
    QJsonObject partnerState(const QString &name);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_email;
    std::unique_ptr<PartnerSimulator> m_sms;
    std::unique_ptr<OnceRunner> m_once;
};

void RoutingTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void RoutingTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    PartnerFaults faults;
    faults.idempotent = false; // every request that reaches a partner is an effect
    m_email = std::make_unique<PartnerSimulator>(faults);
    m_sms = std::make_unique<PartnerSimulator>(faults);
    QString error;
    QVERIFY2(m_email->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY2(m_sms->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void RoutingTest::cleanup()
{
    m_once.reset();
    m_email.reset();
    m_sms.reset();
    m_dir.reset();
}

QString RoutingTest::writePartnersFile(const QByteArray &json) const
{
    const QString path = m_dir->filePath(QStringLiteral("partners.json"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(json) != json.size())
        qWarning("cannot write %s", qPrintable(path));
    return path;
}

QByteArray RoutingTest::twoPartners() const
{
    return QStringLiteral(R"({"partners": {
        "mail": {"profile": "webhook", "url": "%1", "token": "env:MAIL_TOKEN"},
        "texts": {"profile": "webhook", "url": "%2", "token": "file:%3", "concurrency": 2}
    }, "routes": {"email": "mail", "sms": "texts"}})")
        .arg(url(*m_email), url(*m_sms), m_dir->filePath(QStringLiteral("sms-token")))
        .toUtf8();
}

QJsonObject RoutingTest::partnerState(const QString &name)
{
    const QJsonArray workers = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")});
    for (const QJsonValue &worker : workers) {
        for (const QJsonValue &partner : worker.toObject().value(QLatin1String("partners")).toArray()) {
            if (partner.toObject().value(QLatin1String("name")) == name)
                return partner.toObject();
        }
    }
    return {};
}

// The SMS partner is down for the whole run; e-mail goes on. Every e-mail is applied
// once, none of them ever waits on the SMS partner, the SMS partner's breaker is open on
// the store under its own name, and no SMS reminder dies of a short outage. When the SMS
// partner is back, each SMS goes out once.
void RoutingTest::anOutageAtOnePartnerHoldsBackOnlyItsChannel()
{
    constexpr int Count = 40;
    const QDateTime started = QDateTime::currentDateTimeUtc();
    PartnerFaults down = m_sms->profile();
    down.failRate = 1.0;
    m_sms->setProfile(down);
    QFile token(m_dir->filePath(QStringLiteral("sms-token")));
    QVERIFY(token.open(QIODevice::WriteOnly));
    token.write("sms-secret-token\n");
    token.close();
    const QString partners = writePartnersFile(twoPartners());
    const auto email = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("mail"), {}, QStringLiteral("email"));
    const auto sms = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("text"), {}, QStringLiteral("sms"));
    QCOMPARE(email.size(), Count);
    QCOMPARE(sms.size(), Count);

    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partners"), partners,
                                      QStringLiteral("--worker-id"), QStringLiteral("routes"),
                                      QStringLiteral("--backoff-base-ms"), QStringLiteral("50"),
                                      QStringLiteral("--metrics-listen"), QStringLiteral("127.0.0.1:0")},
                                     {{QStringLiteral("MAIL_TOKEN"), QStringLiteral("mail-secret-token")}});
    QByteArray said;
    const quint16 metricsPort = workerMetricsPort(worker, WorkerTimeoutMs, &said);
    QVERIFY2(metricsPort, said.constData());
    QVERIFY2(pumpUntil([&] { return m_email->stats().effects >= Count; }, WorkerTimeoutMs),
             QByteArray::number(m_email->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_email, email));
    QCOMPARE(m_sms->stats().effects, 0);
    QVERIFY2(pumpUntil([&] { return partnerState(QStringLiteral("texts")).value(QLatin1String("breaker")) == QLatin1String("open"); },
                       WorkerTimeoutMs),
             QJsonDocument(partnerState(QStringLiteral("texts"))).toJson().constData());
    QCOMPARE(partnerState(QStringLiteral("mail")).value(QLatin1String("breaker")).toString(), QStringLiteral("closed"));
    QCOMPARE(partnerState(QStringLiteral("texts")).value(QLatin1String("profile")).toString(), QStringLiteral("webhook"));
    const QJsonObject self = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")}).first().toObject();
    QCOMPARE(self.value(QLatin1String("failing_partner")).toString(), QStringLiteral("texts"));

    // The metrics, `once partners` and the history name the partner.
    QString error;
    const QByteArray metrics = httpGet(metricsPort, "/metrics", &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY2(metrics.contains("once_partner_breaker_open{partner=\"texts\"} 1")
                 && metrics.contains("once_partner_breaker_open{partner=\"mail\"} 0")
                 && metrics.contains("once_partner_sends_applied_total{partner=\"mail\",profile=\"webhook\"} 40"),
             metrics.constData());
    const auto listed = m_once->run({QStringLiteral("partners")});
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    QVERIFY2(listed.out.contains("mail  honours-key=unknown  profile=webhook  state=sending")
                 && listed.out.contains("texts  honours-key=unknown  profile=webhook  state=held back"),
             listed.out.constData());
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(sms.first()), QStringLiteral("--json")});
    QVERIFY2(history.exitedWith(0), history.describe().constData());
    QVERIFY2(history.out.contains("\"partner\": \"texts\"") && history.out.contains("\"partner_profile\": \"webhook\""),
             history.out.constData());

    // No e-mail waited on the SMS partner, and every send names the partner it went to.
    const QStringList held = storeRows(m_stores, m_once->storeUrl(),
                                       QStringLiteral("SELECT send_key FROM attempts WHERE outcome = 'deferred' "
                                                      "AND partner = 'mail'"),
                                       &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY2(held.isEmpty(), qPrintable(held.join(u' ')));
    const QStringList sendsTo = storeRows(m_stores, m_once->storeUrl(),
                                          QStringLiteral("SELECT DISTINCT partner || '/' || partner_profile FROM attempts "
                                                         "WHERE step = 'send' ORDER BY 1"),
                                          &error);
    QCOMPARE(sendsTo, (QStringList{QStringLiteral("mail/webhook"), QStringLiteral("texts/webhook")}));

    PartnerFaults back = m_sms->profile();
    back.failRate = 0;
    m_sms->setProfile(back);
    QVERIFY2(pumpUntil([&] { return m_sms->stats().effects >= Count; }, 3 * WorkerTimeoutMs),
             QByteArray::number(m_sms->stats().effects).constData());
    QVERIFY2(pumpUntil([&] { return m_once->stats().value(QLatin1String("acked")).toInteger() == 2 * Count; },
                       WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_sms, sms));
    QCOMPARE(m_once->stats().value(QLatin1String("dead")).toInteger(), 0);
    m_once->release(worker);

    // Neither secret reached the store.
    for (const QByteArray &secret : {QByteArray("mail-secret-token"), QByteArray("sms-secret-token")}) {
        QStringList scanned;
        const QStringList found = whereStoreHolds(m_stores, m_once->storeUrl(), secret, started, &scanned);
        QVERIFY2(found.isEmpty(), qPrintable(found.join(u' ')));
        QVERIFY2(!scanned.isEmpty(), "nothing of the store was scanned");
    }
}

// A reminder whose channel has no route is dead-lettered as no-route naming its channel;
// no partner sees it, and the routed ones are applied.
void RoutingTest::aChannelWithoutARouteIsDeadLetteredNotSentElsewhere()
{
    const QString partners = writePartnersFile(QStringLiteral(R"({"partners": {
        "mail": {"url": "%1"}, "texts": {"url": "%2"}}, "routes": {"email": "mail", "sms": "texts"}})")
                                                   .arg(url(*m_email), url(*m_sms))
                                                   .toUtf8());
    const auto push = m_once->enqueueReminders(m_dir->path(), 5, QStringLiteral("push"), {}, QStringLiteral("push"));
    const auto email = m_once->enqueueReminders(m_dir->path(), 5, QStringLiteral("mail"), {}, QStringLiteral("email"));
    QCOMPARE(push.size(), 5);
    const auto worker = m_once->waitFor(
        m_once->start({QStringLiteral("worker"), QStringLiteral("--partners"), partners, QStringLiteral("--until-idle")}),
        WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_email->stats().effects, 5);
    QCOMPARE(m_sms->stats().requests, 0);
    const auto letters = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(letters.size(), 5);
    for (const QJsonValue &letter : letters) {
        const QJsonObject object = letter.toObject();
        QCOMPARE(object.value(QLatin1String("error_class")).toString(), QStringLiteral("no-route"));
        QVERIFY2(object.value(QLatin1String("last_error")).toString().contains(QLatin1String("no route for channel \"push\"")),
                 QJsonDocument(object).toJson().constData());
    }
}

// A partner without idempotency drops half its answers after acting: the worker holds
// those keys in doubt (never resends them). `once reconcile` asks the partner's lookup:
// every held key is found there and settled applied with the partner's message id, a
// dry run first settles nothing, and the partner saw each reminder once.
void RoutingTest::reconcileSettlesWhatThePartnerHas()
{
    constexpr int Count = 30;
    PartnerFaults dropping = m_email->profile();
    dropping.dropAfterAcceptRate = 0.5;
    m_email->setProfile(dropping);
    const QString partners = writePartnersFile(QStringLiteral(R"({"partners": {
        "hooks": {"url": "%1", "lookup": "http://127.0.0.1:%2/reminders/{key}"}}})")
                                                   .arg(url(*m_email))
                                                   .arg(m_email->port())
                                                   .toUtf8());
    const auto record = m_once->run({QStringLiteral("partners"), QStringLiteral("hooks"), QStringLiteral("--honours-key"),
                                     QStringLiteral("no")});
    QVERIFY2(record.exitedWith(0), record.describe().constData());
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("hook"), {}, QStringLiteral("email"));
    QCOMPARE(keys.size(), Count);
    const auto worker = m_once->waitFor(
        m_once->start({QStringLiteral("worker"), QStringLiteral("--partners"), partners, QStringLiteral("--until-idle")}),
        WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const qint64 held = m_once->stats().value(QLatin1String("in_doubt")).toInteger();
    QVERIFY2(held > 0 && held == m_email->stats().dropped, QJsonDocument(m_once->stats()).toJson().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_email, keys));

    const auto dry = m_once->run({QStringLiteral("reconcile"), QStringLiteral("--partners"), partners,
                                  QStringLiteral("--dry-run")});
    QVERIFY2(dry.exitedWith(0), dry.describe().constData());
    QVERIFY2(dry.out.contains(QStringLiteral("%1 in doubt, %1 asked, %1 found (dry run").arg(held).toUtf8()),
             dry.out.constData());
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), held);

    const auto reconcile = m_once->run({QStringLiteral("reconcile"), QStringLiteral("--partners"), partners,
                                        QStringLiteral("--json")});
    QVERIFY2(reconcile.exitedWith(0), reconcile.describe().constData());
    const QJsonArray asked = QJsonDocument::fromJson(reconcile.out).array();
    QCOMPARE(asked.size(), int(held));
    for (const QJsonValue &answer : asked) {
        QCOMPARE(answer.toObject().value(QLatin1String("result")).toString(), QStringLiteral("found"));
        QVERIFY(answer.toObject().value(QLatin1String("provider_message_id")).toString().startsWith(QLatin1String("msg_")));
    }
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), 0);
    const QString key = asked.first().toObject().value(QLatin1String("key")).toString();
    const auto history = m_once->run({QStringLiteral("history"), key});
    QVERIFY2(history.out.contains("Reconciled: found at hooks as msg_"), history.out.constData());
    QCOMPARE(m_email->stats().duplicateEffects, 0);
    QCOMPARE(m_email->stats().effects, qint64(Count));
}

// A worker asks on its own, once a key's grace period has passed. One worker is killed
// after claiming a reminder and before sending it; the partner drops its answers to the
// others after acting. The next worker holds every key in doubt (the partner does not
// honour the key), then asks the partner: what it has is settled applied, and what it
// does not have is resent under --in-doubt resend, with the same key, once. Under hold a
// key the partner does not have stays held, saying so.
void RoutingTest::aWorkerReconcilesWhatIsLeftInDoubtAfterTheGracePeriod()
{
    const QString partners = writePartnersFile(QStringLiteral(R"({"partners": {
        "hooks": {"url": "%1", "lookup": "http://127.0.0.1:%2/reminders/{key}", "lookup_grace_s": 1}}})")
                                                   .arg(url(*m_email))
                                                   .arg(m_email->port())
                                                   .toUtf8());
    const auto record = m_once->run({QStringLiteral("partners"), QStringLiteral("hooks"),
                                     QStringLiteral("--honours-key"), QStringLiteral("no")});
    QVERIFY2(record.exitedWith(0), record.describe().constData());
    const QStringList workerArgs{
        QStringLiteral("worker"), QStringLiteral("--partners"), partners,           QStringLiteral("--lease"),
        QStringLiteral("2"),      QStringLiteral("--timeout"),  QStringLiteral("1")};

    const auto lost =
        m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("lost"), {}, QStringLiteral("email"));
    QCOMPARE(lost.size(), 1);
    const auto killed = m_once->waitFor(
        m_once->start(workerArgs, {{QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("after-claim")}}),
        WorkerTimeoutMs);
    QVERIFY2(killed.crashed(), killed.describe().constData());
    QCOMPARE(m_email->stats().requests, 0);

    PartnerFaults dropping = m_email->profile();
    dropping.dropAfterAcceptRate = 1.0;
    m_email->setProfile(dropping);
    constexpr int Count = 4;
    const auto answered =
        m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("mute"), {}, QStringLiteral("email"));
    QCOMPARE(answered.size(), Count);
    QProcess *worker = m_once->start(
        workerArgs + QStringList{QStringLiteral("--in-doubt"), QStringLiteral("resend"),
                                 QStringLiteral("--metrics-listen"), QStringLiteral("127.0.0.1:0")});
    QByteArray said;
    const quint16 metricsPort = workerMetricsPort(worker, WorkerTimeoutMs, &said);
    QVERIFY2(metricsPort, said.constData());
    // The resent reminder's answer is dropped too, so it is in doubt once more and found.
    QVERIFY2(pumpUntil(
                 [&] {
                     const QJsonObject stats = m_once->stats();
                     return stats.value(QLatin1String("acked")).toInteger() == Count + 1 &&
                            stats.value(QLatin1String("in_doubt")).toInteger() == 0;
                 },
                 4 * WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), 0);
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_email, lost + answered));
    QCOMPARE(m_email->stats().duplicateEffects, 0);

    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(lost.first())});
    QVERIFY2(history.out.contains("not found at hooks") &&
                 history.out.contains("resent under --in-doubt resend") &&
                 history.out.contains("Reconciled: found at hooks as msg_"),
             history.out.constData());
    QString error;
    const QByteArray metrics = httpGet(metricsPort, "/metrics", &error);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QVERIFY2(
        metrics.contains(QStringLiteral("once_reconciliations_total{partner=\"hooks\",result=\"found\"} %1")
                             .arg(Count + 1)
                             .toUtf8()) &&
            metrics.contains("once_reconciliations_total{partner=\"hooks\",result=\"not-found\"} 1"),
        metrics.constData());
    m_once->release(worker);

    // Under hold, a key the partner does not have stays held and says so.
    const auto kept =
        m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("kept"), {}, QStringLiteral("email"));
    const auto killedAgain = m_once->waitFor(
        m_once->start(workerArgs, {{QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("after-claim")}}),
        WorkerTimeoutMs);
    QVERIFY2(killedAgain.crashed(), killedAgain.describe().constData());
    const qint64 requestsBefore = m_email->stats().requests;
    worker = m_once->start(workerArgs + QStringList{QStringLiteral("--in-doubt"), QStringLiteral("hold")});
    QVERIFY2(pumpUntil(
                 [&] {
                     return m_once->run({QStringLiteral("history"), QString::fromLatin1(kept.first())})
                         .out.contains("not found at hooks");
                 },
                 WorkerTimeoutMs),
             m_once->run({QStringLiteral("history"), QString::fromLatin1(kept.first())}).out.constData());
    m_once->release(worker);
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), 1);
    QCOMPARE(m_email->stats().requests, requestsBefore); // asked, never sent
}

void RoutingTest::aPartnersFileThatIsAlmostRightIsRefused_data()
{
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("expected");
    QTest::newRow("literal secret") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x", "token": "hunter2-literal"}}})")
                                    << QStringLiteral("never as itself");
    QTest::newRow("unset variable") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x", "token": "env:ONCE_TEST_UNSET_TOKEN"}}})")
                                    << QStringLiteral("ONCE_TEST_UNSET_TOKEN is not set");
    QTest::newRow("unknown profile") << QByteArray(R"({"partners": {"a": {"profile": "carrier-pigeon", "url": "http://127.0.0.1:9/x"}}})")
                                     << QStringLiteral("\"carrier-pigeon\" is not one of webhook");
    QTest::newRow("route to nobody") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x"}}, "routes": {"sms": "b"}})")
                                     << QStringLiteral("route \"sms\" names no partner");
    QTest::newRow("misspelt key") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x", "tokn": "env:X"}}})")
                                  << QStringLiteral("\"tokn\" is not a setting of the webhook profile");
    QTest::newRow("two without routes") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x"}, "b": {"url": "http://127.0.0.1:9/y"}}})")
                                        << QStringLiteral("\"routes\" must say");
    QTest::newRow("bad rate") << QByteArray(R"({"partners": {"a": {"url": "http://127.0.0.1:9/x", "rate": "fast"}}})")
                              << QStringLiteral("\"rate\" must read like");
    QTest::newRow("password in url") << QByteArray(R"({"partners": {"a": {"url": "https://u:hunter2-literal@127.0.0.1:9/x"}}})")
                                     << QStringLiteral("must not carry a password");
    QTest::newRow("not json") << QByteArray(R"({"partners": )") << QStringLiteral("not JSON");
}

void RoutingTest::aPartnersFileThatIsAlmostRightIsRefused()
{
    QFETCH(QByteArray, json);
    QFETCH(QString, expected);
    const QString path = writePartnersFile(json);
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partners"), path});
    QVERIFY2(worker.exitedWith(2), worker.describe().constData());
    const QByteArray err = worker.err.trimmed();
    QVERIFY2(err.contains(expected.toUtf8()), err.constData());
    QVERIFY2(!err.contains("hunter2"), err.constData());
    QCOMPARE(m_email->stats().requests + m_sms->stats().requests, 0);
}

QTEST_GUILESS_MAIN(RoutingTest)
#include "tst_routing.moc"
