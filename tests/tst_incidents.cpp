// `once incidents`: the list (open first, then the latest resolved), acknowledge / note /
// resolve with their audit rows, the refusals (a bad or unknown id, a read-only store),
// and one incident's report in Markdown and JSON, counted from the history a real worker
// wrote against the partner simulator, with a redrive done through `once redrive` inside
// its window. Real `once` processes on SQLite and PostgreSQL.
#include "alerting/incidents.h"
#include "deliveryharness.h"
#include "operator/operations.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "teststores.h"

#include <QDateTime>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class IncidentsTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void listShowsOpenOnesFirstThenTheResolved();
    void ackNoteAndResolveAreAudited();
    void badIdsAndReadOnlyStoresAreRefusedInOneLine();
    void reportCountsTheWindowTheActionsAndTheRedrive();

private:
    QString partnerUrl() const
    {
        return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port());
    }
    // Opens (or keeps open) an incident for each alert, as once watch's evaluation would;
    // the others stay open (a day's grace).
    QList<Incident> record(const QList<Alert> &alerts, qint64 nowMs, qint64 clearAfterMs = 24 * 3600 * 1000);
    static Alert alert(AlertRule rule, AlertSeverity severity, qint64 sinceMs, const QString &partner = {});
    std::optional<Incident> incident(qint64 id);
    QList<AuditEntry> auditLog();
    QJsonArray listed(const QStringList &extra = {});
    void enqueue(int count);
    void runWorker();

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
    std::unique_ptr<Store> m_store;
};

void IncidentsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(
        QStringLiteral("once.core.partnersim.debug=false\nonce.core.database.info=false"));
}

void IncidentsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
    QString error;
    m_store = Store::open(m_once->storeUrl(), &error);
    QVERIFY2(m_store, qPrintable(error));
}

void IncidentsTest::cleanup()
{
    m_store.reset();
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

Alert IncidentsTest::alert(AlertRule rule, AlertSeverity severity, qint64 sinceMs, const QString &partner)
{
    Alert alert;
    alert.rule = rule;
    alert.severity = severity;
    alert.partner = partner;
    alert.sinceMs = sinceMs;
    alert.value = 3;
    alert.threshold = 1;
    return alert;
}

QList<Incident> IncidentsTest::record(const QList<Alert> &alerts, qint64 nowMs, qint64 clearAfterMs)
{
    QStringList summaries;
    for (const Alert &each : alerts)
        summaries << QStringLiteral("%1 summary").arg(each.key());
    QString error;
    const auto changes =
        Incidents(m_store->database()).record(alerts, summaries, nowMs, clearAfterMs, &error);
    if (!changes)
        qWarning("record: %s", qPrintable(error));
    return changes ? changes->opened : QList<Incident>();
}

std::optional<Incident> IncidentsTest::incident(qint64 id)
{
    QString error;
    auto found = Incidents(m_store->database()).get(id, &error);
    if (!found)
        qWarning("get %lld: %s", id, qPrintable(error));
    return found;
}

QList<AuditEntry> IncidentsTest::auditLog()
{
    QString error;
    const auto entries = m_store->inspector().auditLog(100, &error);
    if (!entries)
        qWarning("audit log: %s", qPrintable(error));
    return entries.value_or(QList<AuditEntry>());
}

QJsonArray IncidentsTest::listed(const QStringList &extra)
{
    return m_once->jsonArray(QStringList{QStringLiteral("incidents"), QStringLiteral("--json")} + extra);
}

void IncidentsTest::enqueue(int count)
{
    QByteArray lines;
    for (int i = 0; i < count; ++i)
        lines += QJsonDocument(
                     QJsonObject{{QStringLiteral("user_id"), QStringLiteral("u%1").arg(i)},
                                 {QStringLiteral("reminder_id"), QStringLiteral("r1")},
                                 {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
                                 {QStringLiteral("destination"), QStringLiteral("+1555010%1").arg(i)},
                                 {QStringLiteral("body"), QStringLiteral("hello")}})
                     .toJson(QJsonDocument::Compact) +
                 '\n';
    const QString file = m_dir->filePath(QStringLiteral("reminders.jsonl"));
    QFile out(file);
    QVERIFY(out.open(QIODevice::WriteOnly));
    out.write(lines);
    out.close();
    const auto enqueued = m_once->run({QStringLiteral("enqueue"), file});
    QVERIFY2(enqueued.exitedWith(0), enqueued.describe().constData());
}

void IncidentsTest::runWorker()
{
    const auto worker =
        m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                     QStringLiteral("--max-attempts"), QStringLiteral("1"), QStringLiteral("--until-idle")},
                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
}

void IncidentsTest::listShowsOpenOnesFirstThenTheResolved()
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    // An old one that cleared by itself, then two open now.
    const auto old = record({alert(AlertRule::NoWorker, AlertSeverity::Warning, now - 600000)}, now - 600000);
    QCOMPARE(old.size(), 1);
    record({}, now - 300000, 0);
    const auto open =
        record({alert(AlertRule::DeadLetters, AlertSeverity::Critical, now - 120000),
                alert(AlertRule::PartnerDown, AlertSeverity::Warning, now - 60000, QStringLiteral("acme"))},
               now);
    QCOMPARE(open.size(), 2);

    const QJsonArray all = listed();
    QCOMPARE(all.size(), 3);
    // Open ones, newest first, then the resolved.
    QCOMPARE(all.at(0)[QStringLiteral("rule")].toString(), QStringLiteral("partner-down"));
    QCOMPARE(all.at(0)[QStringLiteral("partner")].toString(), QStringLiteral("acme"));
    QCOMPARE(all.at(0)[QStringLiteral("status")].toString(), QStringLiteral("open"));
    QCOMPARE(all.at(1)[QStringLiteral("rule")].toString(), QStringLiteral("dead-letters"));
    QCOMPARE(all.at(1)[QStringLiteral("severity")].toString(), QStringLiteral("critical"));
    QCOMPARE(all.at(2)[QStringLiteral("id")].toInteger(), old.at(0).id);
    QCOMPARE(all.at(2)[QStringLiteral("status")].toString(), QStringLiteral("resolved"));
    QVERIFY(all.at(2)[QStringLiteral("resolved_by")].isNull());
    QCOMPARE(listed({QStringLiteral("--limit"), QStringLiteral("1")}).size(), 1);

    const auto text = m_once->run({QStringLiteral("incidents")});
    QVERIFY2(text.exitedWith(0), text.describe().constData());
    const QList<QByteArray> lines = text.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 4);
    QVERIFY2(lines.at(0).startsWith("ID ") && lines.at(0).contains("RESOLVED/DURATION"),
             lines.at(0).constData());
    QVERIFY2(lines.at(1).contains(" open ") && lines.at(1).contains(" acme ") &&
                 lines.at(1).contains("open for ") && lines.at(1).contains("partner-down/acme summary"),
             lines.at(1).constData());
    QVERIFY2(lines.at(3).contains(" resolved ") && lines.at(3).contains("(5 min)"), lines.at(3).constData());
}

void IncidentsTest::ackNoteAndResolveAreAudited()
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const auto opened = record({alert(AlertRule::DeadLetters, AlertSeverity::Critical, now - 60000)}, now);
    QCOMPARE(opened.size(), 1);
    const QString id = QString::number(opened.at(0).id);

    const auto ack = m_once->run({QStringLiteral("incidents"), QStringLiteral("ack"), id,
                                  QStringLiteral("--note"), QStringLiteral("on it")});
    QVERIFY2(ack.exitedWith(0), ack.describe().constData());
    QVERIFY2(ack.out.startsWith(QByteArray("incident " + id.toUtf8() + " acknowledged by ")),
             ack.out.constData());
    QCOMPARE(listed().at(0)[QStringLiteral("status")].toString(), QStringLiteral("acknowledged"));
    const auto note =
        m_once->run({QStringLiteral("incidents"), QStringLiteral("note"), id, QStringLiteral("--note"),
                     QStringLiteral("the partner expects a fix at 10:00")});
    QVERIFY2(note.exitedWith(0), note.describe().constData());
    const auto resolve = m_once->run({QStringLiteral("incidents"), QStringLiteral("resolve"), id});
    QVERIFY2(resolve.exitedWith(0), resolve.describe().constData());

    const auto after = incident(opened.at(0).id);
    QVERIFY(after);
    QVERIFY(!after->isOpen());
    QCOMPARE(after->resolvedBy, currentUserName());
    QCOMPARE(after->ackedBy, currentUserName());
    QCOMPARE(after->notes.size(), 3);
    QCOMPARE(after->notes.at(1).note, QStringLiteral("the partner expects a fix at 10:00"));

    // Newest first: what each command wrote, with the note as the reason.
    const QList<AuditEntry> audit = auditLog();
    QCOMPARE(audit.size(), 3);
    QCOMPARE(audit.at(0).action, QStringLiteral("incident-resolve"));
    QCOMPARE(audit.at(1).action, QStringLiteral("incident-note"));
    QCOMPARE(audit.at(1).reason, QStringLiteral("the partner expects a fix at 10:00"));
    QCOMPARE(audit.at(2).action, QStringLiteral("incident-acknowledge"));
    QCOMPARE(audit.at(2).reason, QStringLiteral("on it"));
    for (const AuditEntry &entry : audit) {
        QCOMPARE(entry.detail, QStringLiteral("incident ") + id);
        QCOMPARE(entry.actor, currentUserName());
    }

    // A resolved incident takes notes, nothing else.
    const auto again = m_once->run({QStringLiteral("incidents"), QStringLiteral("resolve"), id});
    QVERIFY2(again.exitedWith(1), again.describe().constData());
    QCOMPARE(again.err.trimmed(), QByteArray("once: incident " + id.toUtf8() + " is resolved already"));
    QCOMPARE(auditLog().size(), 3);
}

void IncidentsTest::badIdsAndReadOnlyStoresAreRefusedInOneLine()
{
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const auto opened = record({alert(AlertRule::NoWorker, AlertSeverity::Warning, now - 60000)}, now);
    QCOMPARE(opened.size(), 1);
    const QString id = QString::number(opened.at(0).id);

    struct Case
    {
        QStringList args;
        int exit;
        QByteArray says;
    };
    const QList<Case> cases{
        {{QStringLiteral("ack"), QStringLiteral("999")}, 1, "no incident 999 on this store"},
        {{QStringLiteral("report"), QStringLiteral("999")}, 1, "no incident 999 on this store"},
        {{QStringLiteral("ack"), QStringLiteral("abc")}, 2, "\"abc\" is not an incident id"},
        {{QStringLiteral("resolve"), QStringLiteral("0")}, 2, "\"0\" is not an incident id"},
        {{QStringLiteral("ack")}, 2, "give one incident id"},
        {{QStringLiteral("note"), id}, 2, "a note needs text"},
        {{QStringLiteral("close"), id}, 2, "unknown action \"close\""},
        {{QStringLiteral("report"), id, QStringLiteral("--format"), QStringLiteral("pdf")},
         2,
         "--format must be"},
        {{QStringLiteral("ack"), id, QStringLiteral("--read-only")},
         1,
         "the store is open read-only (--read-only)"},
        {{QStringLiteral("note"), id, QStringLiteral("--note"), QStringLiteral("x"),
          QStringLiteral("--read-only")},
         1,
         "not acknowledged, noted or resolved"},
    };
    for (const Case &each : cases) {
        const auto result = m_once->run(QStringList{QStringLiteral("incidents")} + each.args);
        QVERIFY2(result.exitedWith(each.exit), result.describe().constData());
        QVERIFY2(result.err.contains(each.says), result.describe().constData());
        // One line, whatever went wrong (a usage error may add its hint on the same line).
        QCOMPARE(result.err.trimmed().count('\n'), 0);
        QVERIFY(result.out.isEmpty());
    }
    // Refused means untouched; looking is allowed read-only.
    QVERIFY(auditLog().isEmpty());
    QCOMPARE(incident(opened.at(0).id)->ackedAtMs, 0);
    QCOMPARE(listed({QStringLiteral("--read-only")}).size(), 1);
    const auto report = m_once->run(
        {QStringLiteral("incidents"), QStringLiteral("report"), id, QStringLiteral("--read-only")});
    QVERIFY2(report.exitedWith(0), report.describe().constData());
}

void IncidentsTest::reportCountsTheWindowTheActionsAndTheRedrive()
{
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));

    // The incident opens; three reminders fail once each and die during it.
    const qint64 start = QDateTime::currentMSecsSinceEpoch();
    const auto opened = record({alert(AlertRule::DeadLetters, AlertSeverity::Critical, start)}, start);
    QCOMPARE(opened.size(), 1);
    const qint64 id = opened.at(0).id;
    const QString idText = QString::number(id);
    // Another incident's note in the same window is not this one's.
    const auto other = record({alert(AlertRule::NoWorker, AlertSeverity::Warning, start)}, start);
    QCOMPARE(other.size(), 1);
    QVERIFY(m_store->operations().actOnIncident(other.at(0).id, Incidents::Action::Note,
                                                QStringLiteral("elsewhere"), &error));

    enqueue(3);
    PartnerFaults failing;
    failing.failRate = 1.0;
    m_partner->setProfile(failing);
    runWorker();
    QVERIFY(m_once->run({QStringLiteral("incidents"), QStringLiteral("ack"), idText}).exitedWith(0));

    // The partner is back: the operator redrives them, and they go.
    m_partner->setProfile(PartnerFaults{});
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"),
                                      QStringLiteral("--reason"), QStringLiteral("partner back")});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    runWorker();
    // The condition clears: resolved by itself.
    record({}, QDateTime::currentMSecsSinceEpoch(), 0);

    const auto json = m_once->run({QStringLiteral("incidents"), QStringLiteral("report"), idText,
                                   QStringLiteral("--format"), QStringLiteral("json")});
    QVERIFY2(json.exitedWith(0), json.describe().constData());
    const QJsonObject report = QJsonDocument::fromJson(json.out).object();
    QCOMPARE(report[QStringLiteral("incident")][QStringLiteral("id")].toInteger(), id);
    QCOMPARE(report[QStringLiteral("incident")][QStringLiteral("status")].toString(),
             QStringLiteral("resolved"));
    const QJsonObject impact = report[QStringLiteral("impact")].toObject();
    QCOMPARE(impact[QStringLiteral("failed_sends")].toInteger(), 3);
    QCOMPARE(impact[QStringLiteral("dead_lettered")].toInteger(), 3);
    QCOMPARE(impact[QStringLiteral("applied")].toInteger(), 3);
    // The history by outcome adds up to the same.
    qint64 sends = 0;
    qint64 deadLetters = 0;
    for (const QJsonValue &each : report[QStringLiteral("outcomes")].toArray()) {
        if (each[QStringLiteral("step")].toString() == QLatin1String("send"))
            sends += each[QStringLiteral("count")].toInteger();
        if (each[QStringLiteral("step")].toString() == QLatin1String("dead-letter"))
            deadLetters += each[QStringLiteral("count")].toInteger();
    }
    QCOMPARE(sends, 6);
    QCOMPARE(deadLetters, 3);

    // What operators did: its acknowledge and the redrive, with what became of the keys.
    QStringList actions;
    QJsonObject redriven;
    for (const QJsonValue &each : report[QStringLiteral("operator_actions")].toArray()) {
        actions << each[QStringLiteral("action")].toString();
        if (each[QStringLiteral("action")].toString() == QLatin1String("redrive"))
            redriven = each.toObject();
    }
    QCOMPARE(actions, (QStringList{QStringLiteral("incident-acknowledge"), QStringLiteral("redrive")}));
    QCOMPARE(redriven[QStringLiteral("count")].toInteger(), 3);
    QCOMPARE(redriven[QStringLiteral("reason")].toString(), QStringLiteral("partner back"));
    QCOMPARE(redriven[QStringLiteral("outcome")][QStringLiteral("delivered")].toInteger(), 3);

    QStringList timeline;
    for (const QJsonValue &each : report[QStringLiteral("timeline")].toArray()) {
        timeline << each[QStringLiteral("event")].toString();
        QVERIFY2(each[QStringLiteral("at")].toString().endsWith(QLatin1Char('Z')),
                 qPrintable(each[QStringLiteral("at")].toString()));
    }
    QCOMPARE(timeline, (QStringList{QStringLiteral("started"), QStringLiteral("acknowledged"),
                                    QStringLiteral("redrive"), QStringLiteral("resolved")}));
    QCOMPARE(report[QStringLiteral("timeline")].toArray().last()[QStringLiteral("text")].toString(),
             QStringLiteral("resolved by itself: the condition cleared"));

    // The same in Markdown, to a file.
    const QString path = m_dir->filePath(QStringLiteral("incident.md"));
    const auto markdown = m_once->run(
        {QStringLiteral("incidents"), QStringLiteral("report"), idText, QStringLiteral("--output"), path});
    QVERIFY2(markdown.exitedWith(0), markdown.describe().constData());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray text = file.readAll();
    QVERIFY2(text.startsWith(QByteArray("# Incident " + idText.toUtf8() + ": Reminders dead-lettered\n")),
             text.constData());
    QVERIFY2(text.contains("\n- **Severity**: critical (the worst it reached)\n"), text.constData());
    QVERIFY2(
        text.contains(
            "| Failed sends | Dead-lettered | Held in doubt | Accepted meanwhile |\n|---:|---:|---:|---:|\n"
            "| 3 | 3 | 0 | 3 |"),
        text.constData());
    QVERIFY2(text.contains(QByteArray("**acknowledged** by " + currentUserName().toUtf8())),
             text.constData());
    QVERIFY2(text.contains(QByteArray("**redrive** by " + currentUserName().toUtf8())), text.constData());
    QVERIFY2(text.contains("3 delivered since, 0 died again, 0 not settled yet"), text.constData());
    QVERIFY2(text.contains("**resolved**: resolved by itself"), text.constData());
    QVERIFY2(QRegularExpression(QStringLiteral("\\| redrive \\| [^|]+ \\| 3 \\| 3 delivered since"))
                 .match(QString::fromUtf8(text))
                 .hasMatch(),
             text.constData());
    QVERIFY2(!text.contains("elsewhere"), text.constData());
    QVERIFY2(QRegularExpression(QStringLiteral("\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC"))
                 .match(QString::fromUtf8(text))
                 .hasMatch(),
             text.constData());
}

QTEST_GUILESS_MAIN(IncidentsTest)
#include "tst_incidents.moc"
