// once watch, as real processes: a real worker meets a partner outage (the in-process
// partner simulator failing every send, then recovering), and the watchers of the store
// tell it once to a JSON webhook, a Slack-shaped webhook and a real SMTP server
// (tests/scripts/smtp-server), while a webhook that refuses is retried without holding the
// others up; two watchers share the store's lease, and the one left after a kill -9 sends
// what is still owed and nothing twice. Reminders go out while an incident is open and
// unacknowledged, and stop once it is acknowledged. Bad --notify values are one line.
#include "deliveryharness.h"
#include "httptesting.h"
#include "smtptesting.h"
#include "teststores.h"

#include "alerting/alertrules.h"
#include "alerting/incidents.h"
#include "store/store.h"

#include <QDateTime>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <memory>

using namespace once;
using namespace oncetest;

namespace {

constexpr int WaitMs = 30000;

// What one webhook path received: each body and when it came.
struct Received
{
    QByteArray path;
    QJsonObject body;
    qint64 atMs = 0;
};

// An HTTP receiver on loopback: every POST recorded by path; paths under /refuse are
// answered 500, the rest 200.
class Receiver final
{
public:
    Receiver()
        : m_server([this](QTcpSocket *socket, int) {
              const QByteArray request = m_server.request();
              const QList<QByteArray> line = request.left(request.indexOf("\r\n")).split(' ');
              const QByteArray path = line.value(1);
              const QByteArray body = request.mid(request.indexOf("\r\n\r\n") + 4);
              received.append(
                  {path, QJsonDocument::fromJson(body).object(), QDateTime::currentMSecsSinceEpoch()});
              if (path.startsWith("/refuse"))
                  socket->write("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nnope");
              else
                  answerOk(socket);
          })
    {
    }

    bool listen() { return m_server.listen(); }
    QString url(const QString &path) const
    {
        return QStringLiteral("http://127.0.0.1:%1%2").arg(m_server.port()).arg(path);
    }

    QList<Received> at(const QByteArray &path) const
    {
        QList<Received> bodies;
        for (const Received &r : received) {
            if (r.path == path)
                bodies.append(r);
        }
        return bodies;
    }
    // The bodies at path whose status is status (firing, resolved) and reminder is reminder.
    QList<Received> with(const QByteArray &path, const QString &status, bool reminder = false) const
    {
        QList<Received> bodies;
        for (const Received &r : at(path)) {
            if (r.body.value(QLatin1String("status")).toString() == status &&
                r.body.value(QLatin1String("reminder")).toBool() == reminder)
                bodies.append(r);
        }
        return bodies;
    }
    // Slack bodies whose text starts with the prefix.
    int slackWith(const QByteArray &path, const QString &prefix) const
    {
        int count = 0;
        for (const Received &r : at(path))
            count += r.body.value(QLatin1String("text")).toString().startsWith(prefix) ? 1 : 0;
        return count;
    }

    QList<Received> received;

private:
    ScriptedServer m_server;
};

QString describe(const QList<Received> &received)
{
    QStringList lines;
    for (const Received &r : received)
        lines << QString::fromUtf8(r.path) + QLatin1Char(' ') +
                     QString::fromUtf8(QJsonDocument(r.body).toJson(QJsonDocument::Compact));
    return lines.join(QLatin1Char('\n'));
}

} // namespace

class WatchTest : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void badNotifyUrlsAreOneLine_data();
    void badNotifyUrlsAreOneLine();
    void anOutageIsToldOnceByTwoWatchers();
    void anOpenIncidentIsRemindedUntilAcknowledged();

private:
    bool setThreshold(AlertRule rule, qint64 value);
    // What a process said on stderr so far (kept: QProcess hands each byte once).
    QByteArray said(QProcess *process);
    QStringList watchArgs(const QStringList &notify, const QString &id) const;
    qint64 storeValue(const QString &sql);
    // Reminders due now (makeReminder's were due in 2024: a lateness alert of their own).
    int enqueueDueNow(const QString &prefix, int count);

    QString m_onceBin;
    TestStores m_stores;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
    QHash<QProcess *, QByteArray> m_said;
};

void WatchTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFileInfo::exists(m_onceBin), "ONCE_BIN must name the once binary (ctest sets it)");
}

void WatchTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
    m_said.clear();
}

void WatchTest::cleanup()
{
    m_once.reset();
    m_said.clear();
    m_dir.reset();
}

bool WatchTest::setThreshold(AlertRule rule, qint64 value)
{
    QString error;
    auto store = Store::open(m_once->storeUrl(), &error);
    // An empty partner, not a null one: the store refuses NULL there (Operations::setAlertThreshold).
    if (!store || !store->operations().setAlertThreshold(rule, QStringLiteral(""), value, &error)) {
        qWarning("cannot set %s: %s", qPrintable(alertRuleName(rule)), qPrintable(error));
        return false;
    }
    return true;
}

QByteArray WatchTest::said(QProcess *process)
{
    QByteArray &text = m_said[process];
    text += process->readAllStandardError();
    return text;
}

QStringList WatchTest::watchArgs(const QStringList &notify, const QString &id) const
{
    QStringList args{QStringLiteral("watch"),
                     QStringLiteral("--interval"),
                     QStringLiteral("1"),
                     QStringLiteral("--clear-after"),
                     QStringLiteral("2"),
                     QStringLiteral("--watcher-id"),
                     id};
    for (const QString &url : notify)
        args << QStringLiteral("--notify") << url;
    return args;
}

qint64 WatchTest::storeValue(const QString &sql)
{
    return storeRows(m_stores, m_once->storeUrl(), sql).value(0).toLongLong();
}

int WatchTest::enqueueDueNow(const QString &prefix, int count)
{
    QByteArray lines;
    const QString now = QDateTime::currentDateTimeUtc().toString(Qt::ISODate);
    for (int i = 0; i < count; ++i) {
        QJsonObject reminder = QJsonDocument::fromJson(makeReminder(prefix, i).line).object();
        reminder.insert(QStringLiteral("scheduled_at"), now);
        lines += QJsonDocument(reminder).toJson(QJsonDocument::Compact) + '\n';
    }
    const QString path = m_dir->filePath(prefix + QStringLiteral(".jsonl"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(lines) != lines.size())
        return 0;
    file.close();
    const auto enqueue = m_once->run({QStringLiteral("enqueue"), path});
    if (!enqueue.exitedWith(0))
        qWarning("%s", enqueue.describe().constData());
    return enqueue.exitedWith(0) ? count : 0;
}

void WatchTest::badNotifyUrlsAreOneLine_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QByteArray>("error");
    QTest::newRow("unknown scheme") << QStringLiteral("ftp://127.0.0.1/x") << QByteArray("unknown scheme");
    QTest::newRow("smtp without to") << QStringLiteral(
                                            "smtp://watch:hunter2secret@127.0.0.1:25?from=a@example.com")
                                     << QByteArray("a mail needs ?from=ADDRESS&to=ADDRESS");
    QTest::newRow("garbage") << QStringLiteral("::not a url") << QByteArray("not a URL with a host");
    QTest::newRow("slack in plain text off loopback")
        << QStringLiteral("slack+http://hooks.example.com/services/T0KEN")
        << QByteArray("only to a loopback address");
    QTest::newRow("missing env") << QStringLiteral("env:ONCE_TEST_NO_SUCH_VARIABLE")
                                 << QByteArray("is not set");
}

void WatchTest::badNotifyUrlsAreOneLine()
{
    QFETCH(QString, url);
    QFETCH(QByteArray, error);
    const auto result = m_once->run({QStringLiteral("watch"), QStringLiteral("--notify"), url});
    QVERIFY2(result.exitedWith(2), result.describe().constData());
    const QByteArray text = result.err.trimmed();
    QVERIFY2(text.contains(error), result.describe().constData());
    QVERIFY2(!text.contains('\n'), result.describe().constData());
    QVERIFY2(!text.contains("hunter2secret") && !text.contains("T0KEN"), result.describe().constData());
}

void WatchTest::anOutageIsToldOnceByTwoWatchers()
{
    QElapsedTimer clock;
    clock.start();
    constexpr qint64 PartnerDownMs = 2000;
    QVERIFY(setThreshold(AlertRule::PartnerDown, PartnerDownMs));

    PartnerFaults faults;
    PartnerSimulator partner(faults);
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const QString partnerUrl = QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port());
    Receiver receiver;
    QVERIFY(receiver.listen());
    SmtpServer smtp;
    const QString smtpError = smtp.start({});
    QVERIFY2(smtpError.isEmpty(), qPrintable(smtpError));
    const QStringList notify{receiver.url(QStringLiteral("/hook")),
                             QStringLiteral("slack+") + receiver.url(QStringLiteral("/slack/T0KEN")),
                             smtp.url() + QStringLiteral("?from=watch@example.com&to=founder@example.com"),
                             receiver.url(QStringLiteral("/refuse"))};

    // A worker that applied a few first: the history's failed sends are then no alert of
    // their own (partner-failing-sends wants none applied), only the worker's spell is.
    QCOMPARE(enqueueDueNow(QStringLiteral("before"), 3), 3);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl,
                                      QStringLiteral("--backoff-base-ms"), QStringLiteral("200"),
                                      QStringLiteral("--backoff-cap-s"), QStringLiteral("1"),
                                      QStringLiteral("--max-attempts"), QStringLiteral("100")});
    QVERIFY2(pumpUntil([&] { return partner.stats().effects >= 3; }, WaitMs), said(worker).constData());

    QProcess *first = m_once->start(watchArgs(notify, QStringLiteral("first")));
    QVERIFY2(pumpUntil([&] { return said(first).contains("holding the watch lease"); }, WaitMs),
             said(first).constData());
    QProcess *second = m_once->start(watchArgs(notify, QStringLiteral("second")));
    QVERIFY2(pumpUntil([&] { return said(second).contains("standing by: first holds"); }, WaitMs),
             said(second).constData());

    // The outage: every send answered 503 while reminders keep coming due.
    faults.failRate = 1.0;
    partner.setProfile(faults);
    const qint64 outageAtMs = QDateTime::currentMSecsSinceEpoch();
    QCOMPARE(enqueueDueNow(QStringLiteral("during"), 20), 20);
    QVERIFY2(pumpUntil([&] { return !receiver.with("/hook", QStringLiteral("firing")).isEmpty(); }, WaitMs),
             qPrintable(describe(receiver.received) + QString::fromUtf8(said(first))));
    const Received firing = receiver.with("/hook", QStringLiteral("firing")).constFirst();
    const qint64 firingSeconds = (firing.atMs - outageAtMs);
    qInfo("firing told %lld ms after the outage began", static_cast<long long>(firingSeconds));
    QCOMPARE(firing.body.value(QLatin1String("alert")).toString(), QStringLiteral("partner-down"));
    QVERIFY(!firing.body.value(QLatin1String("summary")).toString().isEmpty());
    QVERIFY(!firing.body.value(QLatin1String("partner")).toString().isEmpty());
    QVERIFY(firing.body.value(QLatin1String("details")).isObject());
    const qint64 incident = firing.body.value(QLatin1String("incident")).toInteger();
    QVERIFY(incident > 0);
    const qint64 sinceMs =
        QDateTime::fromString(firing.body.value(QLatin1String("since")).toString(), Qt::ISODateWithMs)
            .toMSecsSinceEpoch();
    QVERIFY2(sinceMs >= outageAtMs - 1000, qPrintable(describe({firing})));
    // Not before the threshold says.
    QVERIFY2(firing.atMs >= sinceMs + PartnerDownMs, qPrintable(describe({firing})));

    // The holder dies mid-incident, once it marked the start told (each notifier had its
    // first try: docs/alerts.md); the other takes over after the lease's ttl, with the
    // incident still open, and tells no second start, not even to the webhook that refuses.
    QVERIFY(pumpUntil(
        [&] { return storeValue(QStringLiteral("SELECT notified_firing_at FROM incidents")) > 0; }, WaitMs));
    ::kill(pid_t(first->processId()), SIGKILL);
    QVERIFY2(pumpUntil([&] { return said(second).contains("holding the watch lease"); }, WaitMs),
             said(second).constData());
    pumpUntil([] { return false; }, 1500); // two of its evaluations on the open incident
    if (receiver.with("/hook", QStringLiteral("firing")).size() != 1) {
        for (const Received &r : receiver.at("/hook"))
            qInfo("%s", QJsonDocument(r.body).toJson(QJsonDocument::Compact).left(400).constData());
        for (const QByteArray &line : said(second).split('\n'))
            qInfo("second: %s", line.constData());
    }
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing")).size(), 1);

    faults.failRate = 0;
    partner.setProfile(faults);
    const qint64 recoveredAtMs = QDateTime::currentMSecsSinceEpoch();
    QVERIFY2(pumpUntil([&] { return !receiver.with("/hook", QStringLiteral("resolved")).isEmpty(); }, WaitMs),
             qPrintable(describe(receiver.received) + QString::fromUtf8(said(second))));
    const Received resolved = receiver.with("/hook", QStringLiteral("resolved")).constFirst();
    qInfo("resolved told %lld ms after the partner recovered",
          static_cast<long long>(resolved.atMs - recoveredAtMs));
    QVERIFY(resolved.atMs >= recoveredAtMs);
    QCOMPARE(resolved.body.value(QLatin1String("incident")).toInteger(), incident);
    QVERIFY(!resolved.body.value(QLatin1String("resolved_at")).isNull());

    // The others have theirs too; the refusing webhook did not hold them up.
    const bool othersToo = pumpUntil(
        [&] {
            return receiver.slackWith("/slack/T0KEN", QStringLiteral("[once] RESOLVED")) == 1 &&
                   smtp.stats().value(QLatin1String("mails")).toInt() >= 2;
        },
        WaitMs);
    if (!othersToo) {
        for (const Received &r : receiver.at("/slack/T0KEN"))
            qInfo("%s", QJsonDocument(r.body).toJson(QJsonDocument::Compact).left(300).constData());
        qInfo("mails: %d", smtp.stats().value(QLatin1String("mails")).toInt());
        for (const QByteArray &line : said(second).split('\n'))
            qInfo("second: %s", line.constData());
    }
    QVERIFY(othersToo);
    // What came late would come within a few evaluations.
    pumpUntil([] { return false; }, 2500);
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing")).size(), 1);
    QCOMPARE(receiver.with("/hook", QStringLiteral("resolved")).size(), 1);
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing"), true).size(), 0);
    QCOMPARE(receiver.at("/hook").size(), 2);
    QCOMPARE(receiver.slackWith("/slack/T0KEN", QStringLiteral("[once] FIRING")), 1);
    QCOMPARE(receiver.at("/slack/T0KEN").size(), 2);
    const QJsonArray mails = smtp.mails();
    QCOMPARE(mails.size(), 2);
    QVERIFY(mails.at(0).toObject().value(QLatin1String("data")).toString().contains(QLatin1String("FIRING")));
    QVERIFY(
        mails.at(1).toObject().value(QLatin1String("data")).toString().contains(QLatin1String("RESOLVED")));
    QCOMPARE(mails.at(0).toObject().value(QLatin1String("to")).toArray().at(0).toString(),
             QStringLiteral("founder@example.com"));
    // Refused again and again, with a growing backoff, and said so.
    QVERIFY2(receiver.at("/refuse").size() >= 2, qPrintable(describe(receiver.received)));
    QVERIFY2(said(second).contains("not sent (HTTP 500)"), said(second).constData());
    QVERIFY2(!said(second).contains("T0KEN"), said(second).constData());

    QCOMPARE(storeValue(QStringLiteral("SELECT COUNT(*) FROM incidents")), 1);
    QVERIFY(storeValue(QStringLiteral("SELECT notified_firing_at FROM incidents")) > 0);
    QVERIFY(storeValue(QStringLiteral("SELECT notified_resolved_at FROM incidents")) > 0);

    // SIGTERM: stops at once and frees the lease for the next watcher.
    second->terminate();
    const auto stopped = m_once->waitFor(second, WaitMs);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
    QCOMPARE(storeValue(QStringLiteral("SELECT COUNT(*) FROM leases WHERE name = 'watch'")), 0);
    qInfo("the outage told in %lld ms: webhook %d, Slack %d, mails %d, refusing webhook tried %d times",
          static_cast<long long>(clock.elapsed()), int(receiver.at("/hook").size()),
          int(receiver.at("/slack/T0KEN").size()), int(mails.size()), int(receiver.at("/refuse").size()));
}

void WatchTest::anOpenIncidentIsRemindedUntilAcknowledged()
{
    // No worker while a message waits: no-worker at once; reminded every 2 s.
    QVERIFY(setThreshold(AlertRule::NoWorker, 0));
    QVERIFY(setThreshold(AlertRule::RemindEvery, 2000));
    QCOMPARE(m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("waiting")).size(), 1);
    Receiver receiver;
    QVERIFY(receiver.listen());

    // --once records the incident, tells its start and exits; the watcher that comes next
    // owes no start, only the reminders.
    const auto once = m_once->run({QStringLiteral("watch"), QStringLiteral("--once"),
                                   QStringLiteral("--notify"), receiver.url(QStringLiteral("/hook"))});
    QVERIFY2(once.exitedWith(0), once.describe().constData());
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing")).size(), 1);
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing"))
                 .constFirst()
                 .body.value(QLatin1String("alert"))
                 .toString(),
             QStringLiteral("no-worker"));
    const qint64 incident = receiver.with("/hook", QStringLiteral("firing"))
                                .constFirst()
                                .body.value(QLatin1String("incident"))
                                .toInteger();

    QProcess *watcher =
        m_once->start(watchArgs({receiver.url(QStringLiteral("/hook"))}, QStringLiteral("reminding")));
    QVERIFY2(
        pumpUntil([&] { return receiver.with("/hook", QStringLiteral("firing"), true).size() >= 2; }, WaitMs),
        qPrintable(describe(receiver.received) + QString::fromUtf8(said(watcher))));
    const QList<Received> reminders = receiver.with("/hook", QStringLiteral("firing"), true);
    QVERIFY2(reminders.at(1).atMs - reminders.at(0).atMs >= 2000 - 100, qPrintable(describe(reminders)));
    QCOMPARE(reminders.at(0).body.value(QLatin1String("incident")).toInteger(), incident);
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing")).size(), 1);

    {
        QString error;
        auto store = Store::open(m_once->storeUrl(), &error);
        QVERIFY2(store, qPrintable(error));
        QVERIFY2(
            store->operations().actOnIncident(incident, Incidents::Action::Acknowledge, QString(), &error),
            qPrintable(error));
    }
    const qsizetype remindedBeforeAck = receiver.with("/hook", QStringLiteral("firing"), true).size();
    // Two reminder periods: acknowledged, it is told no more (one already on its way may land).
    pumpUntil([] { return false; }, 4500);
    QVERIFY2(receiver.with("/hook", QStringLiteral("firing"), true).size() <= remindedBeforeAck + 1,
             qPrintable(describe(receiver.received)));
    const qsizetype remindedAfterAck = receiver.with("/hook", QStringLiteral("firing"), true).size();
    pumpUntil([] { return false; }, 2500);
    QCOMPARE(receiver.with("/hook", QStringLiteral("firing"), true).size(), remindedAfterAck);
    qInfo("reminders: %d before the acknowledgement, %d after", int(remindedBeforeAck),
          int(remindedAfterAck - remindedBeforeAck));
}

QTEST_GUILESS_MAIN(WatchTest)
#include "tst_watch.moc"
