// The network between a worker and its PostgreSQL store failing as networks do: packets
// silently dropped for a while (no reset: a failed switch, a firewall, a host that froze),
// and a primary that dies and is replaced by its promoted standby, reached through a URL
// of several hosts. Effects are counted at the in-process partner simulator: nothing is
// lost or applied twice, and the worker says what happened, once.
//
// The same cut between a worker and its broker (Redis Streams): the worker says it lost
// the queue, once, and goes on when the network is back.
//
// Each test runs servers of its own (scripts/postgres-cluster, scripts/redis-server), not
// the suites' shared ones: it kills or cuts them off. The cut needs root (network
// namespaces and nftables, tests/scripts/netns-pair) and skips without it.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QTemporaryDir>
#include <QTest>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

using namespace once;
using namespace oncetest;

namespace {

struct ScriptResult
{
    bool ok = false;
    QByteArray output; // stdout and stderr
};

// Runs a script (or any command) to its end; ok when it exited with 0.
ScriptResult runCommand(const QString &program, const QStringList &arguments, int timeoutMs = 120000)
{
    QProcess process;
    process.setProcessChannelMode(QProcess::MergedChannels);
    process.start(program, arguments);
    ScriptResult result;
    if (!process.waitForFinished(timeoutMs)) {
        process.kill();
        process.waitForFinished(5000);
    }
    result.output = process.readAll();
    result.ok = process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0
                && process.error() == QProcess::UnknownError;
    if (!result.ok)
        qWarning("%s %s: %s", qPrintable(program), qPrintable(arguments.join(QLatin1Char(' '))),
                 result.output.constData());
    return result;
}

// While it lives, this thread (and what it starts: processes, listening sockets) is in
// the network namespace named; the thread's own is back afterwards.
class NetworkNamespace final
{
    Q_DISABLE_COPY_MOVE(NetworkNamespace)

public:
    explicit NetworkNamespace(const QString &name)
    {
        m_own = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        const int other = ::open(QFile::encodeName(QStringLiteral("/var/run/netns/") + name).constData(),
                                 O_RDONLY | O_CLOEXEC);
        m_entered = m_own >= 0 && other >= 0 && ::setns(other, CLONE_NEWNET) == 0;
        if (other >= 0)
            ::close(other);
    }
    ~NetworkNamespace()
    {
        if (m_entered && ::setns(m_own, CLONE_NEWNET) != 0)
            qFatal("cannot return to the test's own network namespace");
        if (m_own >= 0)
            ::close(m_own);
    }
    bool entered() const { return m_entered; }

private:
    int m_own = -1;
    bool m_entered = false;
};

// The worker's standard error as it comes, kept whole.
class ErrorLog final
{
public:
    explicit ErrorLog(QProcess *process) : m_process(process) {}
    const QByteArray &text()
    {
        m_text += m_process->readAllStandardError();
        return m_text;
    }
    qsizetype count(const QByteArray &what) { return text().count(what); }

private:
    QProcess *m_process;
    QByteArray m_text;
};

} // namespace

class StoreNetworkTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void silentCutIsNoticedAndOutlived();
    void failoverToPromotedStandby();
    void silentCutFromRedisIsNoticedAndOutlived();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    bool startPartner();
    QString cluster(const QString &name) const { return m_dir->filePath(name); }
    static QString clusterUrl(const QString &dir);
    // Whether a network can be cut silently here; if not, *why says what is missing.
    bool canCutNetworks(QString *why) const;
    // A namespace pair for this test (cleanup removes it); its server side's name.
    QString upNamespacePair();

    QString m_onceBin;
    QString m_clusterScript;
    QString m_netnsScript;
    QString m_redisScript;
    QStringList m_redisServers; // folders of servers started in m_namespacePair's server side
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
    QStringList m_clusters;
    QString m_namespacePair;
};

void StoreNetworkTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    m_clusterScript = qEnvironmentVariable("ONCE_TEST_POSTGRES_CLUSTER");
    m_netnsScript = qEnvironmentVariable("ONCE_TEST_NETNS_PAIR");
    m_redisScript = qEnvironmentVariable("ONCE_TEST_REDIS_SERVER");
    QVERIFY2(QFile::exists(m_clusterScript) && QFile::exists(m_netnsScript) && QFile::exists(m_redisScript),
             "ONCE_TEST_POSTGRES_CLUSTER, ONCE_TEST_NETNS_PAIR and ONCE_TEST_REDIS_SERVER must name "
             "scripts/postgres-cluster, tests/scripts/netns-pair and scripts/redis-server (ctest sets them)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void StoreNetworkTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    // The clusters run as nobody when the test is root (scripts/postgres-cluster).
    QVERIFY(QFile::setPermissions(m_dir->path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner
                                                     | QFile::ExeGroup | QFile::ExeOther));
}

void StoreNetworkTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    for (const QString &dir : std::as_const(m_clusters))
        runCommand(m_clusterScript, {QStringLiteral("stop"), dir});
    m_clusters.clear();
    // Inside the server side, where the script finds the server on 127.0.0.1.
    for (const QString &dir : std::as_const(m_redisServers))
        runCommand(QStringLiteral("ip"),
                   {QStringLiteral("netns"), QStringLiteral("exec"), m_namespacePair + QStringLiteral("-srv"),
                    m_redisScript, QStringLiteral("stop"), dir});
    m_redisServers.clear();
    if (!m_namespacePair.isEmpty())
        runCommand(m_netnsScript, {QStringLiteral("down"), m_namespacePair});
    m_namespacePair.clear();
    m_dir.reset();
}

bool StoreNetworkTest::startPartner()
{
    m_partner = std::make_unique<PartnerSimulator>();
    // Slow enough that sends are in flight when the network fails.
    PartnerFaults profile;
    profile.latencyMs = 100;
    m_partner->setProfile(profile);
    QString error;
    if (!m_partner->listen(QHostAddress::LocalHost, 0, &error)) {
        qWarning("partner simulator: %s", qPrintable(error));
        return false;
    }
    return true;
}

QString StoreNetworkTest::clusterUrl(const QString &dir)
{
    QFile file(dir + QStringLiteral("/url"));
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QString::fromUtf8(file.readAll()).trimmed();
}

bool StoreNetworkTest::canCutNetworks(QString *why) const
{
    if (::geteuid() != 0)
        *why = QStringLiteral("cutting a network silently needs root (network namespaces and nftables)");
    else if (!runCommand(QStringLiteral("ip"), {QStringLiteral("netns"), QStringLiteral("list")}).ok)
        *why = QStringLiteral("ip netns is not available here (Debian: iproute2)");
    else if (!runCommand(QStringLiteral("nft"), {QStringLiteral("--version")}).ok)
        *why = QStringLiteral("nft is not available here (Debian: nftables)");
    return why->isEmpty();
}

QString StoreNetworkTest::upNamespacePair()
{
    m_namespacePair = QStringLiteral("once%1").arg(QCoreApplication::applicationPid());
    if (!runCommand(m_netnsScript, {QStringLiteral("up"), m_namespacePair}).ok)
        return {};
    return m_namespacePair + QStringLiteral("-srv");
}

// Packets between worker and store dropped for 15 s, without a reset: TCP alone would
// notice only after minutes, and come back seconds after the network did (its
// retransmissions back off). The worker must say within seconds that it lost the store,
// once, reconnect within seconds of the network's return, show the spell in its heartbeat,
// and deliver everything exactly once.
void StoreNetworkTest::silentCutIsNoticedAndOutlived()
{
    QString why;
    if (!canCutNetworks(&why))
        QSKIP(qPrintable(why));
    constexpr qint64 CutMs = 15000;

    const QString serverSide = upNamespacePair();
    QVERIFY(!serverSide.isEmpty());
    const QString dir = cluster(QStringLiteral("cut"));
    m_clusters.append(dir);
    QVERIFY(runCommand(QStringLiteral("ip"), {QStringLiteral("netns"), QStringLiteral("exec"), serverSide,
                                              m_clusterScript, QStringLiteral("start"), dir,
                                              QStringLiteral("169.254.77.1")})
                .ok);
    QString storeUrl = clusterUrl(dir);
    QVERIFY(storeUrl.contains(QLatin1String("@127.0.0.1:")));
    storeUrl.replace(QLatin1String("@127.0.0.1:"), QLatin1String("@169.254.77.1:"));

    // The worker, the commands and the partner are on the other side of the pair.
    NetworkNamespace clientSide(m_namespacePair + QStringLiteral("-cli"));
    QVERIFY(clientSide.entered());
    QVERIFY(startPartner());
    m_once = std::make_unique<OnceRunner>(m_onceBin, storeUrl);
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    auto keys = m_once->enqueueReminders(m_dir->path(), 60, QStringLiteral("before"));
    QCOMPARE(keys.size(), 60);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                      QStringLiteral("--concurrency"), QStringLiteral("2"), QStringLiteral("--worker-id"),
                                      QStringLiteral("cut-worker"), QStringLiteral("--metrics-listen"),
                                      QStringLiteral("127.0.0.1:0")});
    ErrorLog log(worker);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= 5; }, WorkerTimeoutMs), log.text().constData());
    static const QRegularExpression metricsAt(QStringLiteral("metrics at http://127\\.0\\.0\\.1:(\\d+)/metrics"));
    const quint16 metricsPort = quint16(metricsAt.match(QString::fromUtf8(log.text())).captured(1).toUInt());
    QVERIFY2(metricsPort, log.text().constData());
    // The worker's own metrics show the spell while it lasts: its heartbeat on the store cannot.
    const auto storeLostGauge = [&] {
        QString error;
        const QByteArray metrics = httpGet(metricsPort, "/metrics", &error);
        static const QRegularExpression gauge(QStringLiteral("^once_worker_store_lost (\\d+)$"),
                                              QRegularExpression::MultilineOption);
        const auto match = gauge.match(QString::fromUtf8(metrics));
        return match.hasMatch() ? match.captured(1).toInt() : -1;
    };
    QCOMPARE(storeLostGauge(), 0);

    QElapsedTimer clock;
    QVERIFY(runCommand(m_netnsScript, {QStringLiteral("cut"), m_namespacePair}).ok);
    clock.start();
    const qint64 effectsAtCut = m_partner->stats().effects;
    QVERIFY2(pumpUntil([&] { return log.count("lost the store") > 0; }, int(CutMs)),
             qPrintable(QStringLiteral("nothing said within %1 s of the cut: %2")
                            .arg(CutMs / 1000)
                            .arg(QString::fromUtf8(log.text()))));
    const qint64 detectedMs = clock.elapsed();
    QCOMPARE(storeLostGauge(), 1);
    pumpUntil([&] { return clock.elapsed() >= CutMs || worker->state() == QProcess::NotRunning; }, int(CutMs));
    QVERIFY2(worker->state() == QProcess::Running, log.text().constData());
    QVERIFY(runCommand(m_netnsScript, {QStringLiteral("heal"), m_namespacePair}).ok);
    const qint64 cutMs = clock.elapsed();
    QVERIFY2(pumpUntil([&] { return log.count("is back at") > 0; }, 30000), log.text().constData());
    const qint64 resumedMs = clock.elapsed() - cutMs;
    qInfo("cut for %lld ms: the worker said it lost the store %lld ms after the cut, and had it back %lld ms "
          "after the heal (%lld of %lld delivered at the cut)",
          cutMs, detectedMs, resumedMs, effectsAtCut, qint64(keys.size()));
    QCOMPARE(log.count("lost the store"), qsizetype(1));
    // And nothing else about it: no failed heartbeat or sample at every beat, and none of
    // the driver's warnings about the dead session's statements.
    for (const char *noise : {"failed", "cannot prepare", "Unable to free statement", "database not open"})
        QVERIFY2(!log.text().contains(noise), log.text().constData());
    QCOMPARE(storeLostGauge(), 0);
    QVERIFY2(detectedMs < 10000, log.text().constData());
    QVERIFY2(resumedMs < 5000, log.text().constData());

    // It delivers again: what was left, and what comes after.
    keys += m_once->enqueueReminders(m_dir->path(), 5, QStringLiteral("after"));
    QCOMPARE(keys.size(), 65);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= keys.size(); }, WorkerTimeoutMs),
             log.text().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    // The heartbeat says when the store was lost and when it was back.
    QJsonObject self;
    QVERIFY(pumpUntil(
        [&] {
            for (const auto &value : m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")})) {
                if (value.toObject().value(QLatin1String("id")).toString() == QLatin1String("cut-worker"))
                    self = value.toObject();
            }
            return self.value(QLatin1String("store_back_at")).isString();
        },
        10000));
    const auto lostAt = QDateTime::fromString(self.value(QLatin1String("store_lost_at")).toString(), Qt::ISODateWithMs);
    const auto backAt = QDateTime::fromString(self.value(QLatin1String("store_back_at")).toString(), Qt::ISODateWithMs);
    QVERIFY2(lostAt.isValid() && backAt.isValid(), QJsonDocument(self).toJson().constData());
    QVERIFY2(lostAt.msecsTo(backAt) > CutMs - 10000 && lostAt.msecsTo(backAt) < CutMs + 5000,
             QJsonDocument(self).toJson().constData());
    QCOMPARE(log.count("lost the store"), qsizetype(1));
}

// A store reached through a URL of several hosts, as libpq takes them for high
// availability: the primary dies, its standby is promoted, and the worker goes on against
// the new primary (target_session_attrs=read-write keeps it off the standby until then).
void StoreNetworkTest::failoverToPromotedStandby()
{
    const QString primary = cluster(QStringLiteral("primary"));
    const QString standby = cluster(QStringLiteral("standby"));
    m_clusters << standby << primary;
    QVERIFY(runCommand(m_clusterScript, {QStringLiteral("start"), primary}).ok);
    QVERIFY(runCommand(m_clusterScript, {QStringLiteral("standby"), standby, primary}).ok);
    const QUrl primaryUrl(clusterUrl(primary));
    const QUrl standbyUrl(clusterUrl(standby));
    QVERIFY(primaryUrl.isValid() && standbyUrl.isValid());
    const QString storeUrl = QStringLiteral("postgres://once:%1@127.0.0.1:%2,127.0.0.1:%3/postgres"
                                            "?target_session_attrs=read-write")
                                 .arg(primaryUrl.password())
                                 .arg(primaryUrl.port())
                                 .arg(standbyUrl.port());

    QVERIFY(startPartner());
    m_once = std::make_unique<OnceRunner>(m_onceBin, storeUrl);
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    auto keys = m_once->enqueueReminders(m_dir->path(), 60, QStringLiteral("before"));
    QCOMPARE(keys.size(), 60);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                      QStringLiteral("--concurrency"), QStringLiteral("2")});
    ErrorLog log(worker);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= 5; }, WorkerTimeoutMs), log.text().constData());

    QVERIFY(runCommand(m_clusterScript, {QStringLiteral("crash"), primary}).ok);
    QElapsedTimer clock;
    clock.start();
    const qint64 effectsAtCrash = m_partner->stats().effects;
    QVERIFY2(pumpUntil([&] { return log.count("lost the store") > 0; }, 10000), log.text().constData());
    QVERIFY(runCommand(m_clusterScript, {QStringLiteral("promote"), standby}).ok);
    const qint64 promotedMs = clock.elapsed();
    QVERIFY2(pumpUntil([&] { return log.count("is back at") > 0; }, 30000), log.text().constData());
    qInfo("primary crashed; standby promoted %lld ms later; the worker had the store back %lld ms after the "
          "promotion (%lld of %lld delivered at the crash)",
          promotedMs, clock.elapsed() - promotedMs, effectsAtCrash, qint64(keys.size()));
    QVERIFY2(worker->state() == QProcess::Running, log.text().constData());

    keys += m_once->enqueueReminders(m_dir->path(), 5, QStringLiteral("after"));
    QCOMPARE(keys.size(), 65);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= keys.size(); }, WorkerTimeoutMs),
             log.text().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    QCOMPARE(log.count("lost the store"), qsizetype(1));
    // What the worker says names both servers and no password.
    QVERIFY2(log.text().contains(QStringLiteral("127.0.0.1:%1,127.0.0.1:%2").arg(primaryUrl.port()).arg(standbyUrl.port()).toUtf8()),
             log.text().constData());
    QVERIFY(!log.text().contains(primaryUrl.password().toUtf8()));
}

// The store's cut, between a worker and its Redis Streams queue: the store (SQLite) stays,
// the broker goes quiet for 15 s. Without keepalives and a user timeout on its socket the
// worker would wait on a command for TCP's retransmissions; it must say within seconds
// that it lost the queue (named without its password), once, take it back within seconds
// of the network's return, and deliver everything exactly once.
void StoreNetworkTest::silentCutFromRedisIsNoticedAndOutlived()
{
    QString why;
    if (!canCutNetworks(&why))
        QSKIP(qPrintable(why));
    constexpr qint64 CutMs = 15000;

    const QString serverSide = upNamespacePair();
    QVERIFY(!serverSide.isEmpty());
    const QString redisDir = m_dir->filePath(QStringLiteral("redis"));
    m_redisServers.append(redisDir);
    const QStringList inServerSide{QStringLiteral("netns"), QStringLiteral("exec"), serverSide};
    QVERIFY(runCommand(QStringLiteral("ip"),
                       inServerSide + QStringList{m_redisScript, QStringLiteral("start"), redisDir})
                .ok);
    QFile urlFile(redisDir + QStringLiteral("/url"));
    QVERIFY(urlFile.open(QIODevice::ReadOnly));
    const QUrl serverUrl(QString::fromUtf8(urlFile.readAll()).trimmed());
    QVERIFY(serverUrl.isValid() && !serverUrl.password().isEmpty());
    // scripts/redis-server binds 127.0.0.1 only: the worker reaches it across the pair.
    QVERIFY(runCommand(QStringLiteral("ip"),
                       inServerSide + QStringList{QStringLiteral("env"),
                                                  QStringLiteral("REDISCLI_AUTH=") + serverUrl.password(),
                                                  QStringLiteral("redis-cli"), QStringLiteral("-p"),
                                                  QString::number(serverUrl.port()), QStringLiteral("config"),
                                                  QStringLiteral("set"), QStringLiteral("bind"),
                                                  QStringLiteral("127.0.0.1 169.254.77.1")})
                .ok);
    const QString queueUrl = QStringLiteral("redis://:%1@169.254.77.1:%2/0?stream=cut")
                                 .arg(serverUrl.password())
                                 .arg(serverUrl.port());

    NetworkNamespace clientSide(m_namespacePair + QStringLiteral("-cli"));
    QVERIFY(clientSide.entered());
    QVERIFY(startPartner());
    m_once = std::make_unique<OnceRunner>(
        m_onceBin, QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("ledger.db")), queueUrl);
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    auto keys = m_once->enqueueReminders(m_dir->path(), 60, QStringLiteral("before"));
    QCOMPARE(keys.size(), 60);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                      QStringLiteral("--concurrency"), QStringLiteral("2")});
    ErrorLog log(worker);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= 5; }, WorkerTimeoutMs),
             log.text().constData());

    QElapsedTimer clock;
    QVERIFY(runCommand(m_netnsScript, {QStringLiteral("cut"), m_namespacePair}).ok);
    clock.start();
    const qint64 effectsAtCut = m_partner->stats().effects;
    QVERIFY2(pumpUntil([&] { return log.count("lost the queue") > 0; }, int(CutMs)),
             qPrintable(QStringLiteral("nothing said within %1 s of the cut: %2")
                            .arg(CutMs / 1000)
                            .arg(QString::fromUtf8(log.text()))));
    const qint64 detectedMs = clock.elapsed();
    pumpUntil([&] { return clock.elapsed() >= CutMs || worker->state() == QProcess::NotRunning; },
              int(CutMs));
    QVERIFY2(worker->state() == QProcess::Running, log.text().constData());
    QVERIFY(runCommand(m_netnsScript, {QStringLiteral("heal"), m_namespacePair}).ok);
    const qint64 cutMs = clock.elapsed();
    QVERIFY2(pumpUntil([&] { return log.count("is back at") > 0; }, 30000), log.text().constData());
    const qint64 resumedMs = clock.elapsed() - cutMs;
    qInfo("cut for %lld ms: the worker said it lost the queue %lld ms after the cut, and had it back %lld ms "
          "after the heal (%lld of %lld delivered at the cut)",
          cutMs, detectedMs, resumedMs, effectsAtCut, qint64(keys.size()));
    QCOMPARE(log.count("lost the queue"), qsizetype(1));
    const QByteArray named = QStringLiteral("lost the queue redis://169.254.77.1:%1/0?stream=cut at ")
                                 .arg(serverUrl.port())
                                 .toUtf8();
    QVERIFY2(log.text().contains(named), log.text().constData());
    QVERIFY2(!log.text().contains("failed"), log.text().constData());
    QVERIFY2(!log.text().contains(serverUrl.password().toUtf8()),
             "the worker's log shows the broker's password");
    QVERIFY2(detectedMs < 10000, log.text().constData());
    QVERIFY2(resumedMs < 8000, log.text().constData());

    keys += m_once->enqueueReminders(m_dir->path(), 5, QStringLiteral("after"));
    QCOMPARE(keys.size(), 65);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= keys.size(); }, WorkerTimeoutMs),
             log.text().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    QCOMPARE(log.count("lost the queue"), qsizetype(1));
}

QTEST_GUILESS_MAIN(StoreNetworkTest)
#include "tst_storenetwork.moc"
