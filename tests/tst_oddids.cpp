// What a producer may send that once must either understand exactly or refuse, checked
// end to end with real `once` processes: `once enqueue` reports every bad line by number
// with its reason and keeps the rest, and a worker that leases what a foreign producer
// published unchecked dead-letters each bad message as invalid-message while every
// distinct valid id, however odd, takes effect exactly once at the partner.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "model/reminder.h"
#include "testqueues.h"

#include <QLoggingCategory>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

namespace {

QByteArray messageLine(const QString &userId, const QString &reminderId,
                       const QString &scheduledAt = QStringLiteral("2026-12-01T09:00:00Z"), const QString &body = QStringLiteral("b"))
{
    return QJsonDocument(QJsonObject{{QStringLiteral("user_id"), userId},
                                     {QStringLiteral("reminder_id"), reminderId},
                                     {QStringLiteral("scheduled_at"), scheduledAt},
                                     {QStringLiteral("destination"), QStringLiteral("+15550100")},
                                     {QStringLiteral("body"), body}})
        .toJson(QJsonDocument::Compact);
}

// A message of exactly `size` bytes.
QByteArray messageOfSize(const QString &reminderId, qsizetype size)
{
    const qsizetype overhead = messageLine(QStringLiteral("big"), reminderId, QStringLiteral("2026-12-01T09:00:00Z"), {}).size();
    const QByteArray line = messageLine(QStringLiteral("big"), reminderId, QStringLiteral("2026-12-01T09:00:00Z"),
                                        QString(size - overhead, QLatin1Char('x')));
    Q_ASSERT(line.size() == size);
    return line;
}

// A message written by hand around one raw field, for what QJsonDocument cannot write.
QByteArray rawLine(const QByteArray &userIdJson, const QByteArray &rest = {})
{
    return R"({"user_id": )" + userIdJson
           + R"(, "reminder_id": "r", "scheduled_at": "2026-12-01T09:00:00Z", "destination": "+15550100", "body": "b")"
           + rest + '}';
}

} // namespace

class OddIdsTest : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void enqueueReportsEveryBadLineAndKeepsTheRest();
    void workerDeadLettersBadMessagesAndAppliesOddIdsOnce();

private:
    QString writeFile(const QString &name, const QByteArray &content)
    {
        const QString path = m_dir->filePath(name);
        QFile file(path);
        if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size())
            return {};
        return path;
    }
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }

    TestStores m_stores;
    TestQueues m_queues;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

void OddIdsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
    qInfo("store under test: %s, queue: %s", m_stores.isPostgres() ? "PostgreSQL" : "SQLite", qPrintable(m_queues.kind()));
}

void OddIdsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl(), m_queues.newUrl());
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run(QStringList{QStringLiteral("init")} + TestQueues::untilIdleLeaseOptions());
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void OddIdsTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

void OddIdsTest::enqueueReportsEveryBadLineAndKeepsTheRest()
{
    // Line by line: what is sent, and what `once enqueue` must say about it (empty: taken).
    const std::pair<QByteArray, QByteArray> lines[] = {
        {messageOfSize(QStringLiteral("exact-crlf"), MaxMessageBytes) + "\r\n", {}},
        {messageOfSize(QStringLiteral("exact-lf"), MaxMessageBytes) + "\n", {}},
        {messageOfSize(QStringLiteral("over-crlf"), MaxMessageBytes + 1) + "\r\n", "message is over the 256 KiB limit"},
        {messageOfSize(QStringLiteral("over-lf"), MaxMessageBytes + 2) + "\n", "message is over the 256 KiB limit"},
        {messageOfSize(QStringLiteral("far-over"), 3 * MaxMessageBytes) + "\n", "message is over the 256 KiB limit"},
        {rawLine(R"("\ud800")") + '\n', "unpaired surrogate \\uD800 at offset 13"},
        {rawLine(R"("u")", R"(, "user_id": "v")") + "\r\n", "duplicate field \"user_id\""},
        {rawLine(QByteArrayLiteral("\"u\0\"")) + '\n', "control character U+0000 inside a string at offset 14"},
        {rawLine("\"u\xff\"") + '\n', "invalid UTF-8 at offset 14"},
        {rawLine('"' + QByteArray(129, 'u') + '"') + '\n', "field \"user_id\" is 129 bytes of UTF-8, over the limit of 128"},
        {messageLine(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z\n")) + '\n',
         "scheduled_at \"2026-12-01T09:00:00Z\\n\" is not an RFC 3339 time with an offset"},
        {messageLine(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("0001-01-01T00:30:00+01:00")) + '\n',
         "outside the years 0001 to 9999"},
        {"\n", {}}, // an empty line is skipped, not counted
        {messageLine(QStringLiteral("last"), QStringLiteral("no-newline")), {}},
    };
    QByteArray content;
    int accepted = 0, refused = 0;
    for (const auto &[line, reason] : lines) {
        content += line;
        if (line.trimmed().isEmpty())
            continue;
        reason.isEmpty() ? ++accepted : ++refused;
    }
    const QString file = writeFile(QStringLiteral("mixed.jsonl"), content);
    const auto enqueue = m_once->run({QStringLiteral("enqueue"), file});
    QVERIFY2(enqueue.exitedWith(1), enqueue.describe().constData());

    const QList<QByteArray> said = enqueue.err.trimmed().split('\n');
    QCOMPARE(said.size(), refused + 1);
    int at = 0;
    for (int i = 0; i < int(std::size(lines)); ++i) {
        if (lines[i].second.isEmpty())
            continue;
        const QByteArray expected = "line " + QByteArray::number(i + 1) + ": ";
        QVERIFY2(said.at(at).startsWith(expected) && said.at(at).contains(lines[i].second),
                 qPrintable(QStringLiteral("expected %1…%2, got %3")
                                .arg(QString::fromUtf8(expected), QString::fromUtf8(lines[i].second),
                                     QString::fromUtf8(said.at(at)))));
        ++at;
    }
    QCOMPARE(said.last(), "enqueued " + QByteArray::number(accepted) + ", rejected " + QByteArray::number(refused));
    // What was taken is on the queue, nothing else.
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("ready"), accepted}}));
}

void OddIdsTest::workerDeadLettersBadMessagesAndAppliesOddIdsOnce()
{
    // Distinct valid ids that a lenient key would have folded together: each must be one
    // effect. Among them '?' and U+FFFD, which is what an unpaired surrogate became.
    const std::pair<QString, QString> oddIds[] = {
        {QStringLiteral("?"), QStringLiteral("r")},
        {QStringLiteral("\uFFFD"), QStringLiteral("r")},
        {QStringLiteral("%3F"), QStringLiteral("r")},
        {QStringLiteral("%"), QStringLiteral("r")},
        {QStringLiteral("a:b"), QStringLiteral("c")},
        {QStringLiteral("a"), QStringLiteral("b:c")},
        {QStringLiteral("\U0001F514"), QStringLiteral("\U0010FFFD")},
        {QStringLiteral("\U0001F515"), QStringLiteral("\U0010FFFD")},
        {QStringLiteral("\u00e9"), QStringLiteral("r")},  // é, one code point
        {QStringLiteral("e\u0301"), QStringLiteral("r")}, // é, two: another id
        {QStringLiteral("user"), QString(128, QLatin1Char('r'))},
    };
    QByteArray good;
    QList<QByteArray> keys;
    for (const auto &[user, reminder] : oddIds) {
        const QByteArray line = messageLine(user, reminder);
        good += line + '\n' + line + '\n'; // published twice: the second is a duplicate
        keys << makeSendKey(user, reminder, QStringLiteral("2026-12-01T09:00:00Z"));
    }
    // Sent by a producer that checks nothing: each must end as a dead letter that says why.
    const std::pair<QByteArray, const char *> bad[] = {
        {rawLine(R"("\ud800")"), "unpaired surrogate \\uD800"},
        {rawLine(R"("\udfff")"), "unpaired surrogate \\uDFFF"},
        {rawLine(R"("u")", R"(, "user_id": "v")"), "duplicate field \"user_id\""},
        {rawLine(R"("u")", R"(, "meta": {"c": 1, "c": 2})"), "duplicate field \"c\""},
        {rawLine(QByteArrayLiteral("\"\0\"")), "control character U+0000"},
        {rawLine("\"u\tv\""), "control character U+0009"},
        {rawLine("\"u\xc0\xbf\""), "invalid UTF-8"},
        {rawLine(R"("u")", R"(, "x": "\x41")"), "invalid escape \\x"},
        {rawLine('"' + QByteArray(129, 'u') + '"'), "over the limit of 128"},
        {rawLine(R"("u", "destination": "+1\u0000")").replace(R"(, "destination": "+15550100")", ""), "contains U+0000"},
        {messageLine(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("2026-12-01T09:00:00Z\n")), "not an RFC 3339 time"},
        {messageLine(QStringLiteral("u"), QStringLiteral("r"), QStringLiteral("9999-12-31T23:30:00-01:00")), "outside the years"},
    };
    QByteArray unchecked;
    for (const auto &[line, reason] : bad)
        unchecked += line + '\n';

    const auto checked = m_once->run({QStringLiteral("enqueue"), writeFile(QStringLiteral("good.jsonl"), good)});
    QVERIFY2(checked.exitedWith(0), checked.describe().constData());
    const auto raw = m_once->run({QStringLiteral("enqueue"), QStringLiteral("--unchecked"),
                                  writeFile(QStringLiteral("bad.jsonl"), unchecked)});
    // A REST queue carries text and checks every reminder at its door (422
    // invalid_reminder), so what a broker would take unchecked never reaches a worker
    // there: nothing to dead-letter.
    const bool queueRefusesBadReminders = m_queues.kind() == QLatin1String("rest");
    if (queueRefusesBadReminders) {
        QVERIFY2(!raw.exitedWith(0) && raw.err.contains("REST queue"), raw.describe().constData());
    } else {
        QVERIFY2(raw.exitedWith(0), raw.describe().constData());
    }

    const auto worker =
        m_once->waitFor(m_once->start(QStringList{QStringLiteral("worker"), QStringLiteral("--partner"),
                                                  partnerUrl(), QStringLiteral("--until-idle"),
                                                  QStringLiteral("--backoff-base-ms"), QStringLiteral("50")} +
                                      TestQueues::untilIdleWorkerOptions()),
                        WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    // Every distinct odd id took effect once, under its own key, and nothing else did.
    QCOMPARE(QSet<QByteArray>(keys.cbegin(), keys.cend()).size(), keys.size());
    const auto effects = m_partner->effectsByKey();
    for (const QByteArray &key : std::as_const(keys))
        QVERIFY2(effects.value(key) == 1, qPrintable(QStringLiteral("%1 had %2 effects")
                                                         .arg(QString::fromLatin1(key), QString::number(effects.value(key)))));
    QCOMPARE(effects.size(), keys.size());
    QCOMPARE(m_partner->stats().duplicateEffects, 0);

    // Every bad message is a dead letter of class invalid-message, with its own reason.
    const QJsonArray letters = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    if (queueRefusesBadReminders) {
        QCOMPARE(letters.size(), 0);
        VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("ready"), 0},
                                                           {QStringLiteral("dead"), 0},
                                                           {QStringLiteral("acked"), keys.size()},
                                                           {QStringLiteral("duplicate_deliveries"), keys.size()}}));
        return;
    }
    QCOMPARE(letters.size(), int(std::size(bad)));
    QStringList reasons;
    for (const auto &value : letters) {
        const QJsonObject letter = value.toObject();
        QCOMPARE(letter.value(QLatin1String("error_class")).toString(), QStringLiteral("invalid-message"));
        QVERIFY(letter.value(QLatin1String("key")).isNull());
        reasons << letter.value(QLatin1String("last_error")).toString();
    }
    for (const auto &[line, reason] : bad) {
        const auto matching = std::count_if(reasons.cbegin(), reasons.cend(),
                                            [&](const QString &text) { return text.contains(QString::fromUtf8(reason)); });
        QVERIFY2(matching == 1, qPrintable(QString::fromUtf8(reason) + QStringLiteral(" in ") + reasons.join(QStringLiteral(" | "))));
    }
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("ready"), 0},
                                                       {QStringLiteral("dead"), qint64(std::size(bad))},
                                                       {QStringLiteral("acked"), keys.size()},
                                                       {QStringLiteral("duplicate_deliveries"), keys.size()}}));
}

QTEST_GUILESS_MAIN(OddIdsTest)
#include "tst_oddids.moc"
