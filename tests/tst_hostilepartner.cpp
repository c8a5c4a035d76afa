// Process-level tests of a partner that is broken or hostile: real `once worker`
// processes ($ONCE_BIN) against the partner simulator's hostile modes (hostileanswers.h),
// judged by the effects the simulator counts, the store's state as `once` commands show
// it, the worker's exit status and its peak memory (VmHWM in /proc/PID/status).
//
// The simulator runs in this process, as in tst_delivery: every wait for a process goes
// through pumpUntil(), so that this thread keeps answering.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace once;
using namespace oncetest;

Q_DECLARE_METATYPE(once::HostileMode)

namespace {

// What a worker may use at most, whatever a partner sends: far above its normal few tens
// of MiB, far below the gigabytes an unbounded body reached.
constexpr qint64 MemoryBoundKiB = 300 * 1024;

QList<QJsonObject> rowsWhere(const QJsonObject &history, const QString &step)
{
    QList<QJsonObject> rows;
    for (const auto &value : history.value(QLatin1String("attempts")).toArray()) {
        const QJsonObject row = value.toObject();
        if (row.value(QLatin1String("step")).toString() == step)
            rows.append(row);
    }
    return rows;
}

QString compact(const QJsonObject &object)
{
    return QString::fromUtf8(QJsonDocument(object).toJson(QJsonDocument::Compact));
}

} // namespace

class HostilePartnerTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void workerSurvivesAnswersWithoutBounds_data();
    void workerSurvivesAnswersWithoutBounds();
    void manyEndlessAnswersAtOnceStayBounded();
    void echoedTokenIsStoredAndShownNowhere();
    void hostileRequestIdIsKeptAsOnePrintableLine();
    void retryAfterBeyond64BitsWaitsTheCap();
    void tokenThatCannotBeSentIsRefusedAtStart_data();
    void tokenThatCannotBeSentIsRefusedAtStart();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    QProcess *startWorker(const QStringList &extraArgs, const QMap<QString, QString> &env = {});
    void setHostile(HostileMode mode, int count);
    QJsonObject history(const QByteArray &key);
    QJsonObject stats() { return m_once->stats(); }

    TestStores m_stores;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

#define VERIFY_STATS(...) VERIFY_NO_PROBLEMS(statsProblems(stats(), __VA_ARGS__))

void HostilePartnerTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!m_onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void HostilePartnerTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl);
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void HostilePartnerTest::cleanup()
{
    m_once.reset(); // kills what still runs
    m_partner.reset();
    if (m_dir && QTest::currentTestFailed())
        qWarning("the failed test's store was %s", qPrintable(m_storeUrl));
    m_dir.reset();
}

QProcess *HostilePartnerTest::startWorker(const QStringList &extraArgs, const QMap<QString, QString> &env)
{
    // A short lease and fast retries; a timeout long enough that a worker reading an
    // endless answer until it expires would show it in its memory.
    QStringList args{QStringLiteral("worker"),          QStringLiteral("--partner"), partnerUrl(),
                     QStringLiteral("--lease"),           QStringLiteral("10"),
                     QStringLiteral("--timeout"),         QStringLiteral("5"),
                     QStringLiteral("--backoff-base-ms"), QStringLiteral("50")};
    return m_once->start(args + extraArgs, env);
}

void HostilePartnerTest::setHostile(HostileMode mode, int count)
{
    PartnerFaults profile;
    profile.hostile = mode;
    profile.hostileCount = count;
    m_partner->setProfile(profile);
}

QJsonObject HostilePartnerTest::history(const QByteArray &key)
{
    const auto result = m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return QJsonDocument::fromJson(result.out).object();
}

void HostilePartnerTest::workerSurvivesAnswersWithoutBounds_data()
{
    QTest::addColumn<HostileMode>("mode");
    QTest::addColumn<QString>("policy");
    QTest::addColumn<QString>("errorSays");

    const QString resend = QStringLiteral("resend");
    const QString hold = QStringLiteral("hold");
    QTest::newRow("huge Content-Length, resend")
        << HostileMode::HugeContentLength << resend << QStringLiteral("announced a body of 99999999999999 bytes");
    QTest::newRow("endless chunked body, resend")
        << HostileMode::EndlessChunked << resend << QStringLiteral("chunked body longer than the 64 KiB limit");
    QTest::newRow("endless body until close, resend")
        << HostileMode::EndlessBody << resend << QStringLiteral("close-delimited body longer than the 64 KiB limit");
    QTest::newRow("endless headers, resend")
        << HostileMode::EndlessHeaders << resend << QStringLiteral("response headers longer than 64 KiB");
    QTest::newRow("huge Content-Length, hold")
        << HostileMode::HugeContentLength << hold << QStringLiteral("announced a body of 99999999999999 bytes");
    QTest::newRow("endless chunked body, hold")
        << HostileMode::EndlessChunked << hold << QStringLiteral("chunked body longer than the 64 KiB limit");
}

// The first answer misbehaves after the partner acted; the rest are well-behaved. The
// worker stays up and small, and the reminder ends as its in-doubt policy says: resent
// with the same key (the partner replays its first answer: one effect) or held for an
// operator. Never lost, never claimed for ever.
void HostilePartnerTest::workerSurvivesAnswersWithoutBounds()
{
    QFETCH(HostileMode, mode);
    QFETCH(QString, policy);
    QFETCH(QString, errorSays);
    const bool resend = policy == QLatin1String("resend");
    setHostile(mode, 1);
    constexpr int Count = 3;
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("hostile"));
    QCOMPARE(keys.size(), Count);

    // One send at a time, so that exactly the first request meets the hostile answer.
    QProcess *worker = startWorker({QStringLiteral("--in-doubt"), policy, QStringLiteral("--concurrency"), QStringLiteral("1")});
    QVERIFY2(worker->waitForStarted(CommandTimeoutMs), qPrintable(worker->errorString()));
    const qint64 pid = worker->processId();
    qint64 peakKiB = -1;
    const qint64 expectedRequests = resend ? Count + 1 : Count;
    // A held reminder leaves the queue too, but is not counted as acked: it waits in the
    // ledger, in doubt, for an operator.
    const qint64 expectedAcked = resend ? Count : Count - 1;
    const bool settled = pumpUntil(
        [&] {
            peakKiB = std::max(peakKiB, peakMemoryKiB(pid));
            const PartnerStats s = m_partner->stats();
            return worker->state() != QProcess::Running || (s.effects == Count && s.requests == expectedRequests);
        },
        WorkerTimeoutMs);
    // Every outcome recorded before the worker is asked to stop.
    QVERIFY(pumpUntil(
        [&] {
            peakKiB = std::max(peakKiB, peakMemoryKiB(pid));
            return worker->state() != QProcess::Running
                   || statsProblems(stats(), {{QStringLiteral("acked"), expectedAcked}, {QStringLiteral("in_flight"), 0}})
                          .isEmpty();
        },
        WorkerTimeoutMs));
    const bool survived = worker->state() == QProcess::Running;
    worker->terminate();
    const ProcessResult result = m_once->waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(survived && settled, result.describe().constData());
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    QVERIFY2(peakKiB > 0 && peakKiB < MemoryBoundKiB,
             qPrintable(QStringLiteral("the worker's peak memory was %1 KiB").arg(peakKiB)));
    qInfo("peak memory of the worker: %lld KiB", peakKiB);

    // At the partner: one effect per key; the resend carried the same key (a duplicate
    // request, answered by a replay).
    const PartnerStats s = m_partner->stats();
    QCOMPARE(s.hostile, 1);
    QCOMPARE(s.effects, Count);
    QCOMPARE(s.duplicateEffects, 0);
    QCOMPARE(s.requests, expectedRequests);
    QCOMPARE(s.duplicateRequests, resend ? 1 : 0);
    const auto effects = m_partner->effectsByKey();
    for (const QByteArray &key : keys)
        QVERIFY2(effects.value(key) == 1, key.constData());

    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("acked"), expectedAcked},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("in_doubt"), resend ? 0 : 1}});

    // The hostile exchange is in the history as one clear line; the resend came after it.
    int hostileKeys = 0;
    for (const QByteArray &key : keys) {
        const QJsonObject story = history(key);
        const auto sends = rowsWhere(story, QStringLiteral("send"));
        QVERIFY2(!sends.isEmpty(), qPrintable(compact(story)));
        if (sends.first().value(QLatin1String("outcome")).toString() == QLatin1String("applied"))
            continue;
        ++hostileKeys;
        const QJsonObject first = sends.first();
        QCOMPARE(first.value(QLatin1String("error_class")).toString(), QStringLiteral("in-doubt"));
        const QString error = first.value(QLatin1String("error")).toString();
        QVERIFY2(error.contains(QLatin1String("not read to its end")) && error.contains(errorSays), qPrintable(error));
        QVERIFY2(!error.contains(u'\n') && error.size() < 300, qPrintable(error));
        if (resend) {
            QCOMPARE(first.value(QLatin1String("outcome")).toString(), QStringLiteral("in-doubt"));
            QCOMPARE(sends.size(), 2);
            QCOMPARE(sends.at(1).value(QLatin1String("outcome")).toString(), QStringLiteral("applied"));
            QCOMPARE(story.value(QLatin1String("state")).toString(), QStringLiteral("applied"));
        } else {
            QCOMPARE(first.value(QLatin1String("outcome")).toString(), QStringLiteral("held"));
            QCOMPARE(sends.size(), 1);
            QCOMPARE(story.value(QLatin1String("state")).toString(), QStringLiteral("in_doubt"));
        }
    }
    QCOMPARE(hostileKeys, 1);
}

// Every send of a full set of connections meets an answer that never ends, all at once:
// the worker's memory stays bounded by connections times the limits, and every reminder
// ends as a dead letter that says why (one attempt each, so that the circuit breaker,
// which opens after five failures in a row, has no say), none lost, none left claimed.
void HostilePartnerTest::manyEndlessAnswersAtOnceStayBounded()
{
    setHostile(HostileMode::EndlessBody, 0);
    constexpr int Count = 32;
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("many"));
    QCOMPARE(keys.size(), Count);
    QProcess *worker = startWorker({QStringLiteral("--until-idle"), QStringLiteral("--concurrency"),
                                    QString::number(Count), QStringLiteral("--max-attempts"), QStringLiteral("1")});
    QVERIFY2(worker->waitForStarted(CommandTimeoutMs), qPrintable(worker->errorString()));
    const qint64 pid = worker->processId();
    qint64 peakKiB = -1;
    const auto result = m_once->waitFor(worker, WorkerTimeoutMs, [&] { peakKiB = std::max(peakKiB, peakMemoryKiB(pid)); });
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    QVERIFY2(peakKiB > 0 && peakKiB < MemoryBoundKiB,
             qPrintable(QStringLiteral("the worker's peak memory was %1 KiB").arg(peakKiB)));
    qInfo("peak memory of the worker with %d endless answers at once: %lld KiB", Count, peakKiB);
    QCOMPARE(m_partner->stats().requests, Count);
    QCOMPARE(m_partner->stats().effects, Count);
    QCOMPARE(m_partner->stats().duplicateEffects, 0);
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), Count},
                  {QStringLiteral("claimed"), 0}});
    const QJsonArray dead = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(dead.size(), Count);
    for (const auto &value : dead) {
        const QJsonObject letter = value.toObject();
        QCOMPARE(letter.value(QLatin1String("error_class")).toString(), QStringLiteral("in-doubt"));
        QVERIFY2(letter.value(QLatin1String("last_error")).toString().contains(QLatin1String("64 KiB limit")),
                 qPrintable(compact(letter)));
    }
}

// A partner whose error page shows the request's Authorization header, in its body and
// its request id, on every try: the reminders end as dead letters, and the token is in
// none of the store's files nor in anything once prints.
void HostilePartnerTest::echoedTokenIsStoredAndShownNowhere()
{
    // '/', '+' and '=' are written differently by JSON writers and URL encoders.
    const QByteArray token = "hostile-t0k3n/with+chars=";
    const QMap<QString, QString> env{{QStringLiteral("ONCE_PARTNER_TOKEN"), QString::fromLatin1(token)},
                                     {QStringLiteral("QT_LOGGING_RULES"), QStringLiteral("once.*.debug=true")}};
    const QDateTime testStarted = QDateTime::currentDateTime();
    setHostile(HostileMode::EchoAuthorization, 0);
    constexpr int Count = 2;
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("echo"));
    QCOMPARE(keys.size(), Count);

    const auto worker = m_once->waitFor(startWorker({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"),
                                                     QStringLiteral("2"), QStringLiteral("--progress")},
                                                    env),
                                        WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    // The partner did echo it, every time, and acted on nothing.
    QCOMPARE(m_partner->stats().hostile, 2 * Count);
    QCOMPARE(m_partner->stats().effects, 0);
    VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("in_flight"), 0}, {QStringLiteral("dead"), Count}});

    QVERIFY2(!worker.out.contains(token), worker.out.constData());
    QVERIFY2(!worker.err.contains(token), worker.err.constData());
    // What the partner said is kept, with the token replaced.
    const QJsonArray dead = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(dead.size(), Count);
    for (const auto &value : dead) {
        const QString error = value.toObject().value(QLatin1String("last_error")).toString();
        QVERIFY2(error.contains(QLatin1String("HTTP 503")) && error.contains(QLatin1String("Bearer [redacted]")),
                 qPrintable(error));
    }
    QStringList commands;
    for (const QByteArray &key : keys) {
        const QJsonObject story = history(key);
        QCOMPARE(rowsWhere(story, QStringLiteral("send")).size(), 2);
        QVERIFY2(story.value(QLatin1String("provider_request_id")).toString() == QLatin1String("Bearer [redacted]"),
                 qPrintable(compact(story)));
        for (const bool json : {true, false}) {
            QStringList args{QStringLiteral("history"), QString::fromLatin1(key)};
            if (json)
                args << QStringLiteral("--json");
            const auto shown = m_once->run(args);
            QVERIFY2(shown.exitedWith(0), shown.describe().constData());
            QVERIFY2(!shown.out.contains(token) && !shown.err.contains(token), shown.out.constData());
            QVERIFY2(shown.out.contains("[redacted]"), shown.out.constData());
        }
    }
    for (const QStringList &args : QList<QStringList>{{QStringLiteral("dlq")},
                                                      {QStringLiteral("dlq"), QStringLiteral("--json")},
                                                      {QStringLiteral("events"), QStringLiteral("--json")},
                                                      {QStringLiteral("events")},
                                                      {QStringLiteral("stats"), QStringLiteral("--json")}}) {
        const auto shown = m_once->run(args);
        QVERIFY2(shown.exitedWith(0), shown.describe().constData());
        QVERIFY2(!shown.out.contains(token) && !shown.err.contains(token), qPrintable(args.join(u' ')));
    }
    QStringList scanned;
    const QStringList found = whereStoreHolds(m_stores, m_storeUrl, token, testStarted, &scanned);
    QVERIFY2(found.isEmpty(), qPrintable(found.join(QLatin1String("; "))));
    QVERIFY(!scanned.isEmpty());
}

// A request id made to be a spreadsheet formula, clear an operator's terminal and be
// far longer than any real one is kept as one printable line of at most 128 characters.
void HostilePartnerTest::hostileRequestIdIsKeptAsOnePrintableLine()
{
    setHostile(HostileMode::HostileRequestId, 0);
    const auto keys = m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("reqid"));
    QCOMPARE(keys.size(), 1);
    const auto worker = m_once->waitFor(startWorker({QStringLiteral("--until-idle")}), WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().effects, 1);
    VERIFY_STATS({{QStringLiteral("acked"), 1}, {QStringLiteral("in_flight"), 0}});

    const QJsonObject story = history(keys.first());
    const QString id = story.value(QLatin1String("provider_request_id")).toString();
    QVERIFY2(id.startsWith(QLatin1String("=HYPERLINK(")), qPrintable(id));
    QVERIFY2(id.size() <= 128, qPrintable(QString::number(id.size())));
    for (const QChar c : id)
        QVERIFY2(c.isPrint() && c != QChar(0x202E), qPrintable(QStringLiteral("U+%1 in the id").arg(c.unicode(), 4, 16)));
    const auto text = m_once->run({QStringLiteral("history"), QString::fromLatin1(keys.first())});
    QVERIFY2(text.exitedWith(0), text.describe().constData());
    QVERIFY2(!text.out.contains('\x1b') && !text.out.contains('\x07'), text.out.constData());
    QVERIFY2(text.out.size() < 4096, qPrintable(QString::number(text.out.size())));
}

// Retry-After: 99999999999999999999999 asks for longer than the one-day cap: the message
// waits the cap, it is not retried within seconds.
void HostilePartnerTest::retryAfterBeyond64BitsWaitsTheCap()
{
    setHostile(HostileMode::HugeRetryAfter, 0);
    const auto keys = m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("after"));
    QCOMPARE(keys.size(), 1);
    // --until-idle: the worker leaves once nothing is due within a minute.
    const auto worker = m_once->waitFor(
        startWorker({QStringLiteral("--until-idle"), QStringLiteral("--backoff-base-ms"), QStringLiteral("10")}),
        WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().requests, 1);
    QCOMPARE(m_partner->stats().effects, 0);
    VERIFY_STATS({{QStringLiteral("retrying"), 1}, {QStringLiteral("in_flight"), 0}, {QStringLiteral("dead"), 0}});

    const QJsonObject story = history(keys.first());
    const auto sends = rowsWhere(story, QStringLiteral("send"));
    QCOMPARE(sends.size(), 1);
    QCOMPARE(sends.first().value(QLatin1String("error_class")).toString(), QStringLiteral("rate-limited"));
    const auto retries = rowsWhere(story, QStringLiteral("retry"));
    QCOMPARE(retries.size(), 1);
    // A retry row's latency_ms is the delay it scheduled: the cap, one day.
    QCOMPARE(retries.first().value(QLatin1String("latency_ms")).toInteger(), qint64(24) * 3600 * 1000);
}

void HostilePartnerTest::tokenThatCannotBeSentIsRefusedAtStart_data()
{
    QTest::addColumn<QByteArray>("token");
    QTest::addColumn<QString>("why");
    QTest::newRow("CR LF and a header") << QByteArray("tok-part-one\r\nX-Injected: yes") << QStringLiteral("line break");
    QTest::newRow("LF at the end") << QByteArray("tok-part-one\n") << QStringLiteral("line break");
    QTest::newRow("CR alone") << QByteArray("tok-part-one\rtwo") << QStringLiteral("line break");
    QTest::newRow("escape") << QByteArray("tok-part-one\x1b[2J") << QStringLiteral("control character");
    QTest::newRow("tab") << QByteArray("tok-part-one\ttwo") << QStringLiteral("control character");
    QTest::newRow("space at the end") << QByteArray("tok-part-one ") << QStringLiteral("space");
}

// A token that cannot be a header would fail every send before it left, and every
// reminder would be dead-lettered: refused at start with one line, nothing claimed.
void HostilePartnerTest::tokenThatCannotBeSentIsRefusedAtStart()
{
    QFETCH(QByteArray, token);
    QFETCH(QString, why);
    const auto keys = m_once->enqueueReminders(m_dir->path(), 2, QStringLiteral("badtoken"));
    QCOMPARE(keys.size(), 2);
    const QMap<QString, QString> env{{QStringLiteral("ONCE_PARTNER_TOKEN"), QString::fromLatin1(token)}};

    const auto worker = m_once->waitFor(startWorker({QStringLiteral("--until-idle")}, env), WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(2), worker.describe().constData());
    const QByteArray err = worker.err.trimmed();
    QVERIFY2(!err.contains('\n') && err.contains("ONCE_PARTNER_TOKEN") && err.contains(why.toUtf8()), err.constData());
    QVERIFY2(!worker.err.contains("tok-part-one") && !worker.out.contains("tok-part-one"), err.constData());
    QCOMPARE(m_partner->stats().requests, 0);
    // Nothing lost, nothing claimed: both reminders wait for a worker with a usable token.
    VERIFY_STATS({{QStringLiteral("ready"), 2},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("claimed"), 0}});

    // once bench would start workers that inherit the token: it refuses it first.
    const auto bench = m_once->run({QStringLiteral("bench"), QStringLiteral("--count"), QStringLiteral("1")}, env);
    QVERIFY2(bench.exitedWith(2), bench.describe().constData());
    QVERIFY2(bench.err.contains("ONCE_PARTNER_TOKEN") && !bench.err.contains("tok-part-one"), bench.err.constData());
}

QTEST_GUILESS_MAIN(HostilePartnerTest)

#include "tst_hostilepartner.moc"
