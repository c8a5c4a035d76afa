// The events page: lazy loading of the ledger, search, the state filter, an event's
// timeline and verdict, export, and refreshes that keep the operator's place.
#include "display/eventstory.h"
#include "display/historyexport.h"
#include "display/humanunits.h"
#include "models/attemptsmodel.h"
#include "models/eventsmodel.h"
#include "pages/eventspage.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "store/store.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QFile>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSet>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>
#include <QTimeZone>

using namespace once;
using namespace once::ui;

namespace {

const QString Worker = QStringLiteral("worker-7");
constexpr int BulkEvents = 450;
constexpr int TotalEvents = 5 + BulkEvents;
// What a partner might answer: a comma, quotes and a line break, to test CSV quoting.
const QString TrickyError = QStringLiteral("partner said \"no, thanks\", twice\nsee line 2");

Reminder makeReminder(const QString &user, const QString &reminderId, const QString &eventId,
                      const QString &destination = QStringLiteral("+15550100"))
{
    QJsonObject object{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T10:00:00+01:00")},
        {QStringLiteral("destination"), destination},
        {QStringLiteral("body"), QStringLiteral("Reminder %1 for %2").arg(reminderId, user)},
        {QStringLiteral("channel"), QStringLiteral("sms")},
    };
    if (!eventId.isEmpty())
        object.insert(QStringLiteral("event_id"), eventId);
    const auto parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder does not parse: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

// Puts the reminder on the queue and takes it off again: a real message id and delivery.
QueueMessage deliver(Store &store, const Reminder &reminder)
{
    QString error;
    if (!store.queue().enqueue({OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, 0, 0}}, &error))
        qFatal("enqueue failed: %s", qPrintable(error));
    const auto leased = store.queue().lease(1, 60000, Worker, &error);
    if (leased.size() != 1)
        qFatal("lease failed: %s", qPrintable(error));
    return leased.constFirst();
}

ClaimResult::Outcome claim(Store &store, const Reminder &reminder, const QString &messageId, int delivery,
                           qint64 leaseUntilMs = nowMs() + 60000, InDoubtPolicy policy = InDoubtPolicy::Resend)
{
    QString error;
    const auto results = store.ledger().claim({ClaimRequest{reminder, messageId, delivery, leaseUntilMs}}, Worker, policy, &error);
    if (results.size() != 1)
        qFatal("claim failed: %s", qPrintable(error));
    return results.constFirst().outcome;
}

Attempt attempt(const Reminder &reminder, const QString &messageId, int delivery, const QString &step,
                const QString &outcome, int httpStatus = 0, qint64 latencyMs = -1, const QString &errorClass = QString(),
                const QString &error = QString(), const QString &requestId = QString())
{
    return Attempt{reminder.sendKey, reminder.eventId, messageId, delivery, Worker, nowMs(), step, outcome,
                   httpStatus, latencyMs, errorClass, error, requestId};
}

void record(Store &store, const QList<LedgerUpdate> &updates, const QList<Attempt> &attempts)
{
    QString error;
    if (!store.ledger().record(updates, attempts, &error))
        qFatal("record failed: %s", qPrintable(error));
}

// RFC 4180, enough to check what the export wrote.
QList<QStringList> parseCsv(const QString &text)
{
    QList<QStringList> rows;
    QStringList row;
    QString field;
    bool quoted = false;
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text.at(i);
        if (quoted) {
            if (c == QLatin1Char('"')) {
                if (i + 1 < text.size() && text.at(i + 1) == QLatin1Char('"')) {
                    field += c;
                    ++i;
                } else {
                    quoted = false;
                }
            } else {
                field += c;
            }
        } else if (c == QLatin1Char('"')) {
            quoted = true;
        } else if (c == QLatin1Char(',')) {
            row << field;
            field.clear();
        } else if (c == QLatin1Char('\r') && i + 1 < text.size() && text.at(i + 1) == QLatin1Char('\n')) {
            row << field;
            field.clear();
            rows << row;
            row.clear();
            ++i;
        } else {
            field += c;
        }
    }
    if (!field.isEmpty() || !row.isEmpty())
        rows << (row << field);
    return rows;
}

} // namespace

class TestUiEvents : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();

    void summariesAndVerdicts();
    void csvQuoting();
    void csvDefusesFormulas_data();
    void csvDefusesFormulas();
    void csvExportOfAHostileEventRunsNothing();
    void modelLoadsPagesOnDemand();
    void modelStaysConsistentWhileFetching();
    void newFilterDropsOldAnswers();
    void modelOutlivesItsSession();
    void attemptsModelAppendsHistory();
    void searchShowsOneUsersEvents();
    void stateFilterNarrowsTheList();
    void emptyStates();
    void timelineTellsTheStory();
    void copyKeyAndExport();
    void focusSearchPutsCursorInSearchBox();
    void columnLayoutIsRemembered();
    // Changes the store: last.
    void refreshKeepsSelectionAndScroll();

private:
    void selectKey(EventsPage &page, const QByteArray &key);
    bool waitForFilter(EventsPage &page, const QString &text, const QString &state = QString());

    QTemporaryDir m_dir;
    QString m_url;
    Reminder m_aliceDentist;  // applied once, one duplicate suppressed
    Reminder m_aliceVaccine;  // retrying after a 503
    Reminder m_aliceCheckup;  // in doubt, held for an operator
    Reminder m_bobInsurance;  // dead: rejected with 422
    Reminder m_bobHaircut;    // applied
    QList<Reminder> m_bulk;   // claimed, for paging
};

void TestUiEvents::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));
    QCoreApplication::setOrganizationName(QStringLiteral("once-tests"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_uievents"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    m_url = QStringLiteral("sqlite:") + m_dir.filePath(QStringLiteral("events.sqlite"));
    QString error;
    auto store = Store::open(m_url, &error);
    QVERIFY2(store, qPrintable(error));

    m_aliceDentist = makeReminder(QStringLiteral("alice"), QStringLiteral("dentist"), QStringLiteral("evt-a1"));
    const QueueMessage first = deliver(*store, m_aliceDentist);
    QCOMPARE(claim(*store, m_aliceDentist, first.id, first.delivery), ClaimResult::Outcome::Claimed);
    record(*store,
           {LedgerUpdate{m_aliceDentist.sendKey, first.id, first.delivery, LedgerState::Applied, true, nowMs(), 200, {}, {},
                         QStringLiteral("req_123")}},
           {attempt(m_aliceDentist, first.id, first.delivery, QStringLiteral("send"), QStringLiteral("applied"), 200, 12,
                    {}, {}, QStringLiteral("req_123"))});
    // The producer published it twice: the second copy is suppressed and acked.
    const QueueMessage second = deliver(*store, m_aliceDentist);
    QCOMPARE(claim(*store, m_aliceDentist, second.id, second.delivery), ClaimResult::Outcome::Duplicate);
    record(*store, {}, {attempt(m_aliceDentist, second.id, second.delivery, QStringLiteral("ack"), QStringLiteral("acked"))});

    m_aliceVaccine = makeReminder(QStringLiteral("alice"), QStringLiteral("vaccine"), QStringLiteral("evt-a2"));
    const QueueMessage third = deliver(*store, m_aliceVaccine);
    QCOMPARE(claim(*store, m_aliceVaccine, third.id, third.delivery), ClaimResult::Outcome::Claimed);
    record(*store,
           {LedgerUpdate{m_aliceVaccine.sendKey, third.id, third.delivery, LedgerState::Retrying, true, nowMs(), 503,
                         QStringLiteral("http-5xx"), QStringLiteral("HTTP 503 Service Unavailable"), {}}},
           {attempt(m_aliceVaccine, third.id, third.delivery, QStringLiteral("send"), QStringLiteral("transient"), 503, 40,
                    QStringLiteral("http-5xx"), QStringLiteral("HTTP 503 Service Unavailable")),
            attempt(m_aliceVaccine, third.id, third.delivery, QStringLiteral("retry"), QStringLiteral("scheduled"), 0, 1200,
                    {}, QStringLiteral("next try in 1200 ms (try 2 of 8)"))});

    // A holder whose claim ran out without an outcome, then a delivery under the hold policy.
    m_aliceCheckup = makeReminder(QStringLiteral("alice"), QStringLiteral("checkup"), QStringLiteral("evt-a3"));
    const QueueMessage fourth = deliver(*store, m_aliceCheckup);
    QCOMPARE(claim(*store, m_aliceCheckup, fourth.id, fourth.delivery, nowMs() - 1000), ClaimResult::Outcome::Claimed);
    const QueueMessage fifth = deliver(*store, m_aliceCheckup);
    QCOMPARE(claim(*store, m_aliceCheckup, fifth.id, fifth.delivery, nowMs() + 60000, InDoubtPolicy::Hold),
             ClaimResult::Outcome::Held);

    m_bobInsurance = makeReminder(QStringLiteral("bob"), QStringLiteral("insurance"), QStringLiteral("evt-b1"),
                                  QStringLiteral("+15559999"));
    const QueueMessage sixth = deliver(*store, m_bobInsurance);
    QCOMPARE(claim(*store, m_bobInsurance, sixth.id, sixth.delivery), ClaimResult::Outcome::Claimed);
    record(*store,
           {LedgerUpdate{m_bobInsurance.sendKey, sixth.id, sixth.delivery, LedgerState::Dead, true, nowMs(), 422,
                         QStringLiteral("payload-changed"), TrickyError, {}}},
           {attempt(m_bobInsurance, sixth.id, sixth.delivery, QStringLiteral("send"), QStringLiteral("permanent"), 422, 30,
                    QStringLiteral("payload-changed"), TrickyError),
            attempt(m_bobInsurance, sixth.id, sixth.delivery, QStringLiteral("dead-letter"),
                    QStringLiteral("payload-changed"), 0, -1, QStringLiteral("payload-changed"), TrickyError)});

    m_bobHaircut = makeReminder(QStringLiteral("bob"), QStringLiteral("haircut"), QString(), QStringLiteral("+15559999"));
    const QueueMessage seventh = deliver(*store, m_bobHaircut);
    QCOMPARE(claim(*store, m_bobHaircut, seventh.id, seventh.delivery), ClaimResult::Outcome::Claimed);
    record(*store,
           {LedgerUpdate{m_bobHaircut.sendKey, seventh.id, seventh.delivery, LedgerState::Applied, true, nowMs(), 200, {},
                         {}, QStringLiteral("req_456")}},
           {attempt(m_bobHaircut, seventh.id, seventh.delivery, QStringLiteral("send"), QStringLiteral("applied"), 200, 9,
                    {}, {}, QStringLiteral("req_456"))});

    // Enough claimed events for three pages, all in one batch.
    QList<ClaimRequest> requests;
    for (int i = 0; i < BulkEvents; ++i) {
        m_bulk.append(makeReminder(QStringLiteral("bulk"), QStringLiteral("b%1").arg(i, 3, 10, QLatin1Char('0')),
                                   QStringLiteral("evt-bulk-%1").arg(i)));
        requests.append(ClaimRequest{m_bulk.constLast(), QStringLiteral("bulk-%1").arg(i), 1, nowMs() + 3600000});
    }
    QCOMPARE(store->ledger().claim(requests, Worker, InDoubtPolicy::Resend, &error).size(), BulkEvents);
    QCOMPARE(*store->inspector().countEvents(EventFilter(), &error), qint64(TotalEvents));
}

void TestUiEvents::init()
{
    // Every page starts from the default column layout.
    Settings().setHeaderState(QStringLiteral("events"), {});
    Settings().setHeaderState(QStringLiteral("eventsTimeline.eventId"), {});
}

void TestUiEvents::selectKey(EventsPage &page, const QByteArray &key)
{
    const int row = page.eventsModel()->rowOfKey(key);
    QVERIFY2(row >= 0, key.constData());
    QCOMPARE(page.eventsView()->model(), page.eventsModel());
    page.eventsView()->selectRow(row);
    QTRY_VERIFY(page.storyKey() == key && page.storyLoaded());
}

bool TestUiEvents::waitForFilter(EventsPage &page, const QString &text, const QString &state)
{
    const EventsModel *model = page.eventsModel();
    return QTest::qWaitFor([&] {
        return model->filter().text == text && model->filter().state == state && model->hasLoaded() && !model->isLoading()
            && model->total() >= 0;
    });
}

namespace {
// A time as a verdict words it: this computer's zone, with its abbreviation.
QString localTime(qint64 ms)
{
    const QDateTime at = QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc()).toLocalTime();
    return at.toString(QStringLiteral("yyyy-MM-dd HH:mm:ss ")) + at.timeZoneAbbreviation();
}
} // namespace

void TestUiEvents::summariesAndVerdicts()
{
    const Reminder &r = m_aliceDentist;
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 2, QStringLiteral("claim"), QStringLiteral("claimed"))),
             QStringLiteral("Claimed by worker worker-7 (delivery 2 of message 17, event evt-a1)"));
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 2, QStringLiteral("claim"), QStringLiteral("duplicate"), 0, -1,
                                    {}, QStringLiteral("already applied"))),
             QStringLiteral("Duplicate delivery suppressed: already applied (delivery 2 of message 17, event evt-a1)"));
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 1, QStringLiteral("send"), QStringLiteral("applied"), 200, 12,
                                    {}, {}, QStringLiteral("req_123"))),
             QStringLiteral("Sent: HTTP 200 in 12 ms (req_123), recorded and acked"));
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 3, QStringLiteral("claim"), QStringLiteral("resend"))),
             QStringLiteral("In doubt: resent with the same key"));
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 1, QStringLiteral("retry"), QStringLiteral("scheduled"), 0, 1200)),
             QStringLiteral("Retry scheduled in 1.2 s"));
    QCOMPARE(attemptSummary(attempt(r, QStringLiteral("17"), 1, QStringLiteral("retry"), QStringLiteral("scheduled"), 0, 45000)),
             QStringLiteral("Retry scheduled in 45 s"));
    QCOMPARE(attemptSummary(attempt(r, {}, 0, QStringLiteral("operator"), QStringLiteral("marked-delivered"))),
             QStringLiteral("worker-7 marked it delivered"));
    QCOMPARE(attemptSummary(attempt(r, {}, 0, QStringLiteral("reconcile"), QStringLiteral("found"), 200, -1, {},
                                    QStringLiteral("Reconciled: found at postmark as pm-1 at 2026-12-06T10:00:00.000Z"))),
             QStringLiteral("Reconciled: found at postmark as pm-1 at 2026-12-06T10:00:00.000Z"));
    QCOMPARE(attemptSummary(attempt(r, {}, 0, QStringLiteral("partner-event"), QStringLiteral("bounced"), 0, -1, {},
                                    QStringLiteral("bounced at Postmark (postmark) at 2026-12-06T10:05:00.000Z"))),
             QStringLiteral("The provider reported: bounced at Postmark (postmark) at 2026-12-06T10:05:00.000Z"));

    EventRow event;
    event.state = LedgerState::Applied;
    event.duplicates = 2;
    const Attempt sent = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("applied"), 200, 5);
    QCOMPARE(eventVerdict(event, {sent}).text,
             QStringLiteral("Delivered once (1 partner call accepted; 2 duplicate deliveries suppressed)"));
    const Attempt doubt = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("in-doubt"));
    event.duplicates = 0;
    // Two calls with one key: one effect only at a partner that honours the key, so the
    // verdict is worded from what the operator recorded about the partner.
    event.partner = QStringLiteral("https://sms.example/send");
    QCOMPARE(eventVerdict(event, {doubt, sent}).kind, Verdict::Kind::Uncertain);
    QCOMPARE(eventVerdict(event, {doubt, sent}).text,
             QStringLiteral("Accepted, but the partner received 2 calls with the same key (1 unanswered, 1 accepted); one "
                            "effect only if it honours Idempotency-Key, which nobody has recorded for "
                            "https://sms.example/send; the queue delivered it once"));
    event.partnerHonoursKey = KeyHonouring::Ignored;
    QCOMPARE(eventVerdict(event, {doubt, sent}).kind, Verdict::Kind::Duplicated);
    QCOMPARE(eventVerdict(event, {doubt, sent}).text,
             QStringLiteral("May have been delivered 2 times: the partner received 2 calls with the same key (1 "
                            "unanswered, 1 accepted), and https://sms.example/send does not honour Idempotency-Key; the "
                            "queue delivered it once"));
    event.partnerHonoursKey = KeyHonouring::Honoured;
    QCOMPARE(eventVerdict(event, {doubt, sent}).kind, Verdict::Kind::Delivered);
    // A claim that expired without an outcome, taken over and resent: that holder may have called too.
    const Attempt resend = attempt(r, QStringLiteral("2"), 1, QStringLiteral("claim"), QStringLiteral("resend"));
    QCOMPARE(eventVerdict(event, {resend, sent}).text,
             QStringLiteral("Delivered once: the partner received 2 calls with the same key (1 by a worker that died "
                            "before recording it, 1 accepted), and https://sms.example/send honours Idempotency-Key, so "
                            "it acted once; the queue delivered it once"));
    // A 429 and a 503 are answers that nothing was done: at a partner that does not honour
    // the key, three calls are still one effect (they read "may have been delivered 3 times").
    event.partnerHonoursKey = KeyHonouring::Ignored;
    Attempt throttled = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("transient"), 429);
    throttled.errorClass = QStringLiteral("rate-limited");
    Attempt unavailable = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("transient"), 503);
    unavailable.errorClass = QStringLiteral("http-5xx");
    QCOMPARE(eventVerdict(event, {throttled, unavailable, sent}).kind, Verdict::Kind::Delivered);
    QCOMPARE(eventVerdict(event, {throttled, unavailable, sent}).possibleEffects, 1);
    // The last try of an in-doubt send is recorded "transient" with the in-doubt class: it
    // may have acted.
    Attempt lastDoubt = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("transient"));
    lastDoubt.errorClass = QStringLiteral("in-doubt");
    QCOMPARE(eventVerdict(event, {lastDoubt, sent}).kind, Verdict::Kind::Duplicated);
    QCOMPARE(eventVerdict(event, {lastDoubt, sent}).possibleEffects, 2);
    // A refused connection never reached the partner: one call, one effect.
    Attempt refused = attempt(r, QStringLiteral("1"), 1, QStringLiteral("send"), QStringLiteral("transient"));
    refused.errorClass = QStringLiteral("connect-failed");
    event.partnerHonoursKey = KeyHonouring::Unknown;
    QCOMPARE(eventVerdict(event, {refused, sent}).text,
             QStringLiteral("Delivered once (1 partner call accepted; no duplicate deliveries)"));
    event.state = LedgerState::Claimed;
    event.claimedBy = QStringLiteral("worker-7");
    event.claimedAtMs = nowMs() - 2000;
    event.claimExpiresAtMs = nowMs() + 28000;
    QCOMPARE(eventVerdict(event, {}).kind, Verdict::Kind::Pending);
    QCOMPARE(eventVerdict(event, {}).text,
             QStringLiteral("Not delivered yet: worker-7 claimed it to send it; the claim "
                            "runs until %1")
                 .arg(localTime(event.claimExpiresAtMs)));
    // Its claim ran out with nothing recorded: its worker was killed or paused, and nobody
    // is sending it. The verdict said "a worker is sending it now", for as long as no worker
    // ran to take it over.
    event.claimExpiresAtMs = nowMs() - 1000;
    QCOMPARE(eventVerdict(event, {}).kind, Verdict::Kind::Uncertain);
    QCOMPARE(eventVerdict(event, {}).text,
             QStringLiteral(
                 "Not delivered yet: claimed by worker-7 at %1, may have been sent (the claim ran out at %2 "
                 "without a recorded outcome); the next worker to lease it resends it with the same key, or "
                 "holds it for an operator")
                 .arg(localTime(event.claimedAtMs), localTime(event.claimExpiresAtMs)));
    event.state = LedgerState::InDoubt;
    QVERIFY(eventVerdict(event, {doubt}).text.startsWith(QLatin1String("In doubt: an operator must decide")));
    event.state = LedgerState::Dead;
    QVERIFY(eventVerdict(event, {}).text.startsWith(QLatin1String("Dead-lettered")));
    QCOMPARE(formatCount(1234), QStringLiteral("1,234"));
}

void TestUiEvents::csvQuoting()
{
    QCOMPARE(csvField(QStringLiteral("plain")), QStringLiteral("plain"));
    QCOMPARE(csvField(QString()), QString());
    QCOMPARE(csvField(QStringLiteral("a,b")), QStringLiteral("\"a,b\""));
    QCOMPARE(csvField(QStringLiteral("say \"hi\"")), QStringLiteral("\"say \"\"hi\"\"\""));
    QCOMPARE(csvField(QStringLiteral("two\nlines")), QStringLiteral("\"two\nlines\""));
    QCOMPARE(csvField(QStringLiteral(" padded")), QStringLiteral("\" padded\""));
    QCOMPARE(parseCsv(csvField(TrickyError) + QStringLiteral("\r\n")), QList<QStringList>{{TrickyError}});
}

void TestUiEvents::csvDefusesFormulas_data()
{
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("field");
    QTest::newRow("=") << QStringLiteral("=HYPERLINK(\"http://evil\",\"x\")")
                       << QStringLiteral("\"'=HYPERLINK(\"\"http://evil\"\",\"\"x\"\")\"");
    QTest::newRow("+") << QStringLiteral("+1+1") << QStringLiteral("'+1+1");
    QTest::newRow("-") << QStringLiteral("-2+3") << QStringLiteral("'-2+3");
    QTest::newRow("@") << QStringLiteral("@SUM(A1)") << QStringLiteral("'@SUM(A1)");
    QTest::newRow("tab") << QStringLiteral("\t=1") << QStringLiteral("'\t=1");
    QTest::newRow("CR") << QStringLiteral("\r=1") << QStringLiteral("\"'\r=1\"");
    QTest::newRow("inside is fine") << QStringLiteral("a=b") << QStringLiteral("a=b");
    QTest::newRow("plain") << QStringLiteral("req_42") << QStringLiteral("req_42");
}

void TestUiEvents::csvDefusesFormulas()
{
    QFETCH(QString, value);
    QFETCH(QString, field);
    QCOMPARE(csvField(value), field);
}

// Every value a producer or a partner chose, exported: no cell starts like a formula.
void TestUiEvents::csvExportOfAHostileEventRunsNothing()
{
    EventRow event;
    event.sendKey = "%3Dcmd:r:2026-12-01T09:00:00Z";
    event.eventId = QStringLiteral("=1+1");
    Attempt send{{}, {}, QStringLiteral("@msg"), 1, QStringLiteral("-worker"), 1764579600000, QStringLiteral("send"),
                 QStringLiteral("transient"), 503, 12, QStringLiteral("http-5xx"),
                 QStringLiteral("=HYPERLINK(\"http://evil\")"), QStringLiteral("+cmd|' /C calc'!A0")};
    const auto rows = parseCsv(QString::fromUtf8(historyToCsv(event, {send})));
    QCOMPARE(rows.size(), 2);
    for (const QString &cell : rows.at(1))
        QVERIFY2(cell.isEmpty() || !QStringLiteral("=+-@\t\r").contains(cell.front()), qPrintable(cell));
    QVERIFY(rows.at(1).contains(QStringLiteral("'=1+1")));
    QVERIFY(rows.at(1).contains(QStringLiteral("'+cmd|' /C calc'!A0")));
}

void TestUiEvents::modelLoadsPagesOnDemand()
{
    StoreSession session(m_url);
    EventsModel model;
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    model.setSession(&session);
    QCOMPARE(model.rowCount(), 0);
    QVERIFY(model.canFetchMore({}));
    QCOMPARE(model.columnCount(), int(EventsModel::Count));
    QTest::qWait(100);
    QCOMPARE(answers.count(), 0); // nothing is read until someone looks

    model.ensureLoaded();
    QTRY_COMPARE(model.rowCount(), EventsModel::PageSize);
    QTRY_COMPARE(model.total(), qint64(TotalEvents));
    QVERIFY(model.canFetchMore({}));
    // A view asks again and again while it scrolls: one request per page.
    model.fetchMore({});
    model.fetchMore({});
    model.fetchMore({});
    QVERIFY(model.isLoading());
    QTRY_COMPARE(model.rowCount(), 2 * EventsModel::PageSize);
    QTest::qWait(200);
    QCOMPARE(model.rowCount(), 2 * EventsModel::PageSize);
    QCOMPARE(answers.count(), 2);
    model.fetchMore({});
    QTRY_COMPARE(model.rowCount(), TotalEvents);
    QVERIFY(!model.canFetchMore({}));
    QCOMPARE(answers.count(), 3);

    QSet<QByteArray> keys;
    for (int row = 0; row < model.rowCount(); ++row) {
        keys.insert(model.event(row).sendKey);
        if (row > 0)
            QVERIFY(model.event(row - 1).createdAtMs >= model.event(row).createdAtMs);
        QCOMPARE(model.index(row, EventsModel::SendKey).data(EventsModel::SendKeyRole).toString(),
                 QString::fromLatin1(model.event(row).sendKey));
    }
    QCOMPARE(keys.size(), TotalEvents);

    // Formatting lives in data(); the raw values sit under RawRole.
    const int dentist = model.rowOfKey(m_aliceDentist.sendKey);
    QVERIFY(dentist >= 0);
    QCOMPARE(model.index(dentist, EventsModel::ScheduledAt).data(EventsModel::RawRole).toLongLong(),
             m_aliceDentist.scheduledAt.toMSecsSinceEpoch());
    QCOMPARE(model.index(dentist, EventsModel::ScheduledAt).data().toString(),
             m_aliceDentist.scheduledAt.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")));
    QCOMPARE(model.index(dentist, EventsModel::State).data().toString(), QStringLiteral("applied"));
    QVERIFY(!model.index(dentist, EventsModel::State).data(Qt::DecorationRole).value<QIcon>().isNull());
    QCOMPARE(model.index(dentist, EventsModel::Duplicates).data(EventsModel::RawRole).toInt(), 1);
    QCOMPARE(model.index(dentist, EventsModel::User).data().toString(), QStringLiteral("alice"));
    QCOMPARE(model.index(dentist, EventsModel::EventId).data().toString(), QStringLiteral("evt-a1"));
    QCOMPARE(model.index(dentist, EventsModel::Channel).data().toString(), QStringLiteral("sms"));
    const int insurance = model.rowOfKey(m_bobInsurance.sendKey);
    QVERIFY(model.index(insurance, EventsModel::LastError).data().toString().startsWith(QLatin1String("payload-changed: ")));
}

// The model tester calls fetchMore() after every change, as a view scrolled to the end
// would: the model must stay consistent while pages arrive, and load each page once.
void TestUiEvents::modelStaysConsistentWhileFetching()
{
    StoreSession session(m_url);
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    model.setSession(&session);
    model.ensureLoaded();
    QTRY_COMPARE(model.rowCount(), TotalEvents);
    QVERIFY(!model.canFetchMore({}));
    QTest::qWait(100);
    QCOMPARE(answers.count(), 3);
    EventFilter bob;
    bob.text = QStringLiteral("bob");
    model.setFilter(bob);
    QTRY_COMPARE(model.rowCount(), 2);
    QTRY_COMPARE(model.total(), qint64(2));
}

// A session that closes while a page is out (the console opening another store): the
// model lets go of it, asks nothing of it, and takes the next one.
void TestUiEvents::modelOutlivesItsSession()
{
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto first = std::make_unique<StoreSession>(m_url);
    model.setSession(first.get());
    model.ensureLoaded();
    first.reset();
    QCOMPARE(model.session(), nullptr);
    model.ensureLoaded();
    model.refreshRows(0, 10);
    model.setFilter(EventFilter());
    QCOMPARE(model.rowCount(), 0);
    StoreSession next(m_url);
    model.setSession(&next);
    model.ensureLoaded();
    QTRY_COMPARE(model.rowCount(), TotalEvents);
}

void TestUiEvents::newFilterDropsOldAnswers()
{
    StoreSession session(m_url);
    EventsModel model;
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    model.setSession(&session);
    model.setFilter(EventFilter());
    EventFilter alice;
    alice.text = QStringLiteral("alice");
    model.setFilter(alice);
    QTRY_VERIFY(model.hasLoaded() && model.total() >= 0);
    QTRY_COMPARE(answers.count(), 2); // the answer to the first filter came, and was dropped
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.total(), qint64(3));
    for (int row = 0; row < model.rowCount(); ++row)
        QCOMPARE(model.event(row).userId, QStringLiteral("alice"));
    QVERIFY(!model.canFetchMore({}));
}

void TestUiEvents::attemptsModelAppendsHistory()
{
    AttemptsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const Reminder &r = m_aliceVaccine;
    QList<Attempt> history{
        attempt(r, QStringLiteral("3"), 1, QStringLiteral("send"), QStringLiteral("transient"), 503, 40,
                QStringLiteral("http-5xx"), QStringLiteral("HTTP 503 Service Unavailable")),
        attempt(r, QStringLiteral("3"), 1, QStringLiteral("retry"), QStringLiteral("scheduled"), 0, 1200),
    };
    model.setAttempts(history);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.columnCount(), int(AttemptsModel::Count));
    QCOMPARE(model.index(1, AttemptsModel::Summary).data().toString(), QStringLiteral("Retry scheduled in 1.2 s"));
    QCOMPARE(model.index(0, AttemptsModel::Summary).data().toString(), QStringLiteral("Send failed: HTTP 503 in 40 ms [http-5xx]"));
    QCOMPARE(model.index(0, AttemptsModel::HttpStatus).data().toInt(), 503);
    QCOMPARE(model.index(0, AttemptsModel::Latency).data().toString(), QStringLiteral("40 ms"));
    QCOMPARE(model.index(0, AttemptsModel::Error).data().toString(), QStringLiteral("http-5xx: HTTP 503 Service Unavailable"));
    QCOMPARE(model.index(0, AttemptsModel::Time).data(AttemptsModel::RawRole).toLongLong(), history.at(0).atMs);
    QVERIFY(model.index(0, AttemptsModel::Time).data().toString().contains(QLatin1Char('.'))); // milliseconds
    QCOMPARE(model.index(0, AttemptsModel::Delivery).data().toInt(), 1);

    // A reload that extends the history appends; the view keeps its place.
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    model.setAttempts(history);
    QCOMPARE(inserted.count(), 0);
    history.append(attempt(r, QStringLiteral("3"), 2, QStringLiteral("send"), QStringLiteral("applied"), 200, 8, {}, {},
                           QStringLiteral("req_9")));
    model.setAttempts(history);
    QCOMPARE(inserted.count(), 1);
    QCOMPARE(reset.count(), 0);
    QCOMPARE(model.rowCount(), 3);
    // A different history (another event) starts over.
    model.setAttempts({history.constLast()});
    QCOMPARE(reset.count(), 1);
    QCOMPARE(model.rowCount(), 1);
    model.clear();
    QCOMPARE(model.rowCount(), 0);
}

void TestUiEvents::searchShowsOneUsersEvents()
{
    StoreSession session(m_url);
    EventsPage page;
    page.resize(1200, 700);
    page.show();
    page.setSession(&session);
    page.refresh();
    EventsModel *model = page.eventsModel();
    QTRY_COMPARE(model->rowCount(), EventsModel::PageSize);
    QTRY_COMPARE(page.countText(), QStringLiteral("455 events"));

    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    QVERIFY(search);
    QCOMPARE(search->placeholderText(), QStringLiteral("User, destination, reminder, send key or event id · prefix* · body:text"));
    QTest::keyClicks(search, QStringLiteral("alice"));
    QTest::keyClick(search, Qt::Key_Return);
    QVERIFY(waitForFilter(page, QStringLiteral("alice")));
    QTRY_COMPARE(model->rowCount(), 3);
    for (int row = 0; row < model->rowCount(); ++row)
        QCOMPARE(model->event(row).userId, QStringLiteral("alice"));
    QTRY_COMPARE(page.countText(), QStringLiteral("3 events"));

    // Typing alone searches after a short pause.
    search->clear();
    QTest::keyClicks(search, QStringLiteral("bob"));
    QVERIFY(waitForFilter(page, QStringLiteral("bob")));
    QCOMPARE(model->rowCount(), 2);
    QCOMPARE(page.countText(), QStringLiteral("2 events"));

    // Destination, reminder, send key and event id find their events too.
    const QList<std::pair<QString, int>> searches{
        {QStringLiteral("+15559999"), 2},
        {QStringLiteral("vaccine"), 1},
        {QString::fromLatin1(m_aliceCheckup.sendKey), 1},
        {QStringLiteral("evt-b1"), 1},
        {QStringLiteral("  evt-b1  "), 1}, // pasted with spaces
    };
    for (const auto &[text, rows] : searches) {
        search->setText(text);
        page.search();
        QVERIFY(waitForFilter(page, text.trimmed()));
        QCOMPARE(model->rowCount(), rows);
    }
}

void TestUiEvents::stateFilterNarrowsTheList()
{
    StoreSession session(m_url);
    EventsPage page;
    page.resize(1200, 700);
    page.show();
    page.setSession(&session);
    page.refresh();
    EventsModel *model = page.eventsModel();
    auto *states = page.findChild<QComboBox *>(QStringLiteral("stateFilter"));
    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    QVERIFY(states && search);
    QStringList items;
    for (int i = 0; i < states->count(); ++i)
        items << states->itemText(i);
    QCOMPARE(items, (QStringList{QStringLiteral("All"), QStringLiteral("queued"), QStringLiteral("claimed"), QStringLiteral("retrying"),
                                 QStringLiteral("applied"), QStringLiteral("in_doubt"), QStringLiteral("dead"),
                                 QStringLiteral("expired"), QString(),
                                 QStringLiteral("possibly more than one effect"), QStringLiteral("unanswered")}));
    // What the history says, not the ledger's state: no event here had two calls that may
    // each have acted.
    states->setCurrentIndex(states->findData(QStringLiteral("calls:several-effects")));
    QTRY_VERIFY(model->filter().calls == EventFilter::Calls::SeveralEffects && model->hasLoaded() && !model->isLoading());
    QCOMPARE(model->rowCount(), 0);
    // A day with nothing in any history: nothing listed.
    auto *when = page.findChild<QComboBox *>(QStringLiteral("whenFilter"));
    QVERIFY(when);
    states->setCurrentIndex(0);
    when->setCurrentIndex(when->findText(QStringLiteral("Yesterday")));
    QTRY_VERIFY(model->filter().sinceMs > 0 && model->filter().calls == EventFilter::Calls::Any && model->hasLoaded()
                && !model->isLoading());
    QCOMPARE(model->rowCount(), 0);
    when->setCurrentIndex(when->findText(QStringLiteral("Today")));
    QTRY_VERIFY(model->filter().sinceMs > nowMs() - 24 * 3600 * 1000 && model->hasLoaded() && !model->isLoading());
    // The five with a history today (the bulk rows were claimed without writing one).
    QTRY_COMPARE(model->total(), qint64(5));
    when->setCurrentIndex(0);

    states->setCurrentIndex(states->findData(QStringLiteral("dead")));
    QVERIFY(waitForFilter(page, QString(), QStringLiteral("dead")));
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(model->event(0).sendKey, m_bobInsurance.sendKey);
    QCOMPARE(page.countText(), QStringLiteral("1 event"));

    states->setCurrentIndex(states->findData(QStringLiteral("applied")));
    QVERIFY(waitForFilter(page, QString(), QStringLiteral("applied")));
    QCOMPARE(model->rowCount(), 2);

    // None of these expired: the filter is offered, and finds nothing.
    states->setCurrentIndex(states->findData(QStringLiteral("expired")));
    QVERIFY(waitForFilter(page, QString(), QStringLiteral("expired")));
    QCOMPARE(model->rowCount(), 0);

    states->setCurrentIndex(states->findData(QStringLiteral("claimed")));
    QVERIFY(waitForFilter(page, QString(), QStringLiteral("claimed")));
    QCOMPARE(model->rowCount(), EventsModel::PageSize);
    QCOMPARE(model->total(), qint64(BulkEvents));
    QCOMPARE(page.countText(), QStringLiteral("450 events"));

    // The state and the search combine.
    search->setText(QStringLiteral("alice"));
    page.search();
    states->setCurrentIndex(states->findData(QStringLiteral("in_doubt")));
    QVERIFY(waitForFilter(page, QStringLiteral("alice"), QStringLiteral("in_doubt")));
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(model->event(0).sendKey, m_aliceCheckup.sendKey);
    states->setCurrentIndex(states->findData(QStringLiteral("retrying")));
    QVERIFY(waitForFilter(page, QStringLiteral("alice"), QStringLiteral("retrying")));
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(model->event(0).sendKey, m_aliceVaccine.sendKey);

    states->setCurrentIndex(0);
    QVERIFY(waitForFilter(page, QStringLiteral("alice")));
    QCOMPARE(model->rowCount(), 3);
}

void TestUiEvents::emptyStates()
{
    EventsPage page;
    page.resize(1200, 700);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    auto *storyEmpty = page.findChild<QLabel *>(QStringLiteral("storyEmpty"));
    auto *eventsEmpty = page.findChild<QLabel *>(QStringLiteral("eventsEmpty"));
    QVERIFY(storyEmpty && eventsEmpty);
    QVERIFY(storyEmpty->isVisible());
    QCOMPARE(storyEmpty->text(), QStringLiteral("Select an event to see its story"));
    QVERIFY(eventsEmpty->isVisible());
    QCOMPARE(eventsEmpty->text(), QStringLiteral("No store is open"));

    StoreSession session(m_url);
    page.setSession(&session);
    page.refresh();
    QTRY_VERIFY(page.eventsView()->isVisible());
    QVERIFY(!eventsEmpty->isVisible());

    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    search->setText(QStringLiteral("nobody"));
    page.search();
    QVERIFY(waitForFilter(page, QStringLiteral("nobody")));
    QTRY_VERIFY(eventsEmpty->isVisible());
    QVERIFY2(eventsEmpty->text().startsWith(QLatin1String("No events match")), qPrintable(eventsEmpty->text()));
    QCOMPARE(page.countText(), QStringLiteral("0 events"));
    QVERIFY(storyEmpty->isVisible());
    QVERIFY(page.verdictText().isEmpty());
}

void TestUiEvents::timelineTellsTheStory()
{
    StoreSession session(m_url);
    EventsPage page;
    page.resize(1400, 800);
    page.show();
    page.setSession(&session);
    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    search->setText(QStringLiteral("alice"));
    page.search();
    QVERIFY(waitForFilter(page, QStringLiteral("alice")));
    AttemptsModel *timeline = page.attemptsModel();
    auto *storyEmpty = page.findChild<QLabel *>(QStringLiteral("storyEmpty"));
    QVERIFY(storyEmpty->isVisible());

    selectKey(page, m_aliceDentist.sendKey);
    QVERIFY(!storyEmpty->isVisible());
    QCOMPARE(timeline->rowCount(), 3);
    QCOMPARE(timeline->index(0, AttemptsModel::Summary).data().toString(),
             QStringLiteral("Sent: HTTP 200 in 12 ms (req_123), recorded and acked"));
    const QString duplicate = timeline->index(1, AttemptsModel::Summary).data().toString();
    QVERIFY2(duplicate.startsWith(QLatin1String("Duplicate delivery suppressed: already applied (delivery 1 of message "))
                 && duplicate.endsWith(QLatin1String(", event evt-a1)")),
             qPrintable(duplicate));
    QCOMPARE(timeline->index(1, AttemptsModel::EventId).data().toString(), QStringLiteral("evt-a1"));
    QCOMPARE(timeline->index(2, AttemptsModel::Summary).data().toString(), QStringLiteral("Acked without sending"));
    QCOMPARE(timeline->index(0, AttemptsModel::ProviderRequestId).data().toString(), QStringLiteral("req_123"));
    QCOMPARE(timeline->index(1, AttemptsModel::Step).data().toString(), QStringLiteral("claim"));
    QCOMPARE(timeline->index(1, AttemptsModel::Outcome).data().toString(), QStringLiteral("duplicate"));
    QCOMPARE(timeline->index(0, AttemptsModel::Worker).data().toString(), Worker);
    QCOMPARE(page.verdictText(), QStringLiteral("Delivered once (1 partner call accepted; 1 duplicate delivery suppressed)"));
    // Below it, the same in words for the customer, at a local time.
    QVERIFY2(QRegularExpression(QStringLiteral("^To the customer: “We sent this once; our partner confirmed it at "
                                               "\\d\\d:\\d\\d( on \\d+ \\w+)?\\.”$"))
                 .match(page.customerText())
                 .hasMatch(),
             qPrintable(page.customerText()));
    if (const QString dir = qEnvironmentVariable("ONCE_TEST_SCREENSHOTS"); !dir.isEmpty())
        page.grab().save(dir + QStringLiteral("/events-story.png"));
    auto *key = page.findChild<QLabel *>(QStringLiteral("factKey"));
    QCOMPARE(key->text(), QString::fromLatin1(m_aliceDentist.sendKey));

    selectKey(page, m_aliceVaccine.sendKey);
    QCOMPARE(timeline->rowCount(), 2);
    QCOMPARE(timeline->index(1, AttemptsModel::Summary).data().toString(), QStringLiteral("Retry scheduled in 1.2 s"));
    QCOMPARE(page.verdictText(), QStringLiteral("Not delivered yet: 1 failed send, retrying"));

    selectKey(page, m_aliceCheckup.sendKey);
    QCOMPARE(timeline->rowCount(), 1);
    QCOMPARE(timeline->index(0, AttemptsModel::Summary).data().toString(), QStringLiteral("In doubt: held for an operator"));
    QVERIFY(timeline->index(0, AttemptsModel::Error).data().toString().contains(QLatin1String("ended without a recorded outcome")));
    QVERIFY2(page.verdictText().startsWith(QLatin1String("In doubt: an operator must decide")), qPrintable(page.verdictText()));

    search->setText(QStringLiteral("bob"));
    page.search();
    QVERIFY(waitForFilter(page, QStringLiteral("bob")));
    QVERIFY(page.storyKey().isEmpty()); // a new search closes the story
    QVERIFY(storyEmpty->isVisible());
    selectKey(page, m_bobInsurance.sendKey);
    QCOMPARE(timeline->rowCount(), 2);
    QCOMPARE(timeline->index(0, AttemptsModel::Summary).data().toString(),
             QStringLiteral("Rejected: HTTP 422 in 30 ms [payload-changed]"));
    QCOMPARE(timeline->index(1, AttemptsModel::Summary).data().toString(), QStringLiteral("Dead-lettered: payload-changed"));
    QCOMPARE(page.verdictText(), QStringLiteral("Dead-lettered: not delivered (payload-changed)"));
}

void TestUiEvents::copyKeyAndExport()
{
    StoreSession session(m_url);
    EventsPage page;
    page.resize(1400, 800);
    page.show();
    page.setSession(&session);
    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    search->setText(QStringLiteral("bob"));
    page.search();
    QVERIFY(waitForFilter(page, QStringLiteral("bob")));

    QString error;
    QVERIFY(!page.exportHistory(m_dir.filePath(QStringLiteral("none.json")), &error)); // no story open
    QVERIFY(!error.isEmpty());

    selectKey(page, m_bobInsurance.sendKey);
    auto *copy = page.findChild<QPushButton *>(QStringLiteral("copyKey"));
    QVERIFY(copy && copy->isEnabled());
    QGuiApplication::clipboard()->clear();
    QTest::mouseClick(copy, Qt::LeftButton);
    QCOMPARE(QGuiApplication::clipboard()->text(), QString::fromLatin1(m_bobInsurance.sendKey));

    // JSON: the event as `once history --json` words it, then its history.
    const QString jsonPath = m_dir.filePath(QStringLiteral("insurance.json"));
    QVERIFY2(page.exportHistory(jsonPath, &error), qPrintable(error));
    QFile json(jsonPath);
    QVERIFY(json.open(QIODevice::ReadOnly));
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(json.readAll(), &parseError);
    QVERIFY2(parseError.error == QJsonParseError::NoError, qPrintable(parseError.errorString()));
    const QJsonObject root = document.object();
    QCOMPARE(root.value(QStringLiteral("event")).toObject().value(QStringLiteral("key")).toString(),
             QString::fromLatin1(m_bobInsurance.sendKey));
    QCOMPARE(root.value(QStringLiteral("event")).toObject().value(QStringLiteral("state")).toString(), QStringLiteral("dead"));
    QCOMPARE(root.value(QStringLiteral("verdict")).toString(), page.verdictText());
    const QJsonArray history = root.value(QStringLiteral("history")).toArray();
    QCOMPARE(history.size(), 2);
    QCOMPARE(history.at(0).toObject().value(QStringLiteral("step")).toString(), QStringLiteral("send"));
    QCOMPARE(history.at(0).toObject().value(QStringLiteral("http_status")).toInt(), 422);
    QCOMPARE(history.at(0).toObject().value(QStringLiteral("error")).toString(), TrickyError);
    QCOMPARE(history.at(1).toObject().value(QStringLiteral("step")).toString(), QStringLiteral("dead-letter"));
    QVERIFY(!history.at(1).toObject().value(QStringLiteral("summary")).toString().isEmpty());

    // CSV: a header, then a line per history row, quoted where it must be.
    const QString csvPath = m_dir.filePath(QStringLiteral("insurance.csv"));
    QVERIFY2(page.exportHistory(csvPath, &error), qPrintable(error));
    QFile csv(csvPath);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(csv.readAll());
    QVERIFY(text.endsWith(QLatin1String("\r\n")));
    const QList<QStringList> rows = parseCsv(text);
    QCOMPARE(rows.size(), 3);
    const QStringList header = rows.at(0);
    QCOMPARE(header.value(0), QStringLiteral("send_key"));
    for (const QStringList &row : rows)
        QCOMPARE(row.size(), header.size());
    const auto column = [&](const char *name) { return int(header.indexOf(QString::fromLatin1(name))); };
    QVERIFY(column("error") >= 0 && column("step") >= 0 && column("http_status") >= 0 && column("summary") >= 0);
    QCOMPARE(rows.at(1).at(column("send_key")), QString::fromLatin1(m_bobInsurance.sendKey));
    QCOMPARE(rows.at(1).at(column("step")), QStringLiteral("send"));
    QCOMPARE(rows.at(1).at(column("http_status")), QStringLiteral("422"));
    QCOMPARE(rows.at(1).at(column("error")), TrickyError);
    QCOMPARE(rows.at(2).at(column("step")), QStringLiteral("dead-letter"));
    QCOMPARE(rows.at(2).at(column("summary")), QStringLiteral("Dead-lettered: payload-changed"));
}

void TestUiEvents::focusSearchPutsCursorInSearchBox()
{
    EventsPage page;
    page.show();
    page.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&page));
    auto *search = page.findChild<QLineEdit *>(QStringLiteral("search"));
    auto *states = page.findChild<QComboBox *>(QStringLiteral("stateFilter"));
    states->setFocus();
    QTRY_VERIFY(states->hasFocus());
    page.focusSearch();
    QTRY_VERIFY(search->hasFocus());
}

void TestUiEvents::columnLayoutIsRemembered()
{
    {
        EventsPage page;
        QHeaderView *header = page.eventsView()->horizontalHeader();
        header->moveSection(header->visualIndex(EventsModel::SendKey), 0);
        header->resizeSection(EventsModel::User, 222);
    }
    EventsPage page;
    QHeaderView *header = page.eventsView()->horizontalHeader();
    QCOMPARE(header->visualIndex(EventsModel::SendKey), 0);
    QCOMPARE(header->sectionSize(EventsModel::User), 222);
}

void TestUiEvents::refreshKeepsSelectionAndScroll()
{
    StoreSession session(m_url);
    EventsPage page;
    page.resize(1200, 600);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setSession(&session);
    page.refresh();
    EventsModel *model = page.eventsModel();
    QTableView *view = page.eventsView();
    QTRY_COMPARE(model->rowCount(), EventsModel::PageSize);
    QTRY_COMPARE(model->total(), qint64(TotalEvents));

    const int selectedRow = 5;
    const EventRow selected = model->event(selectedRow);
    QCOMPARE(selected.state, QStringLiteral("claimed"));
    selectKey(page, selected.sendKey);
    QCOMPARE(page.attemptsModel()->rowCount(), 0);
    QVERIFY2(page.verdictText().startsWith(
                 QLatin1String("Not delivered yet: worker-7 claimed it to send it; the claim "
                               "runs until ")),
             qPrintable(page.verdictText()));
    QCOMPARE(view->verticalScrollBar()->value(), 0);

    // The store moves on under the page: a new event arrives, the selected one is sent.
    const Reminder newcomer = makeReminder(QStringLiteral("zoe"), QStringLiteral("yoga"), QStringLiteral("evt-z1"));
    {
        QString error;
        auto store = Store::open(m_url, &error);
        QVERIFY2(store, qPrintable(error));
        QCOMPARE(claim(*store, newcomer, QStringLiteral("z-1"), 1), ClaimResult::Outcome::Claimed);
        // Bulk reminder b042 was claimed by message bulk-42.
        const QString holder = QStringLiteral("bulk-%1").arg(selected.reminderId.mid(1).toInt());
        Reminder sent;
        sent.sendKey = selected.sendKey;
        sent.eventId = selected.eventId;
        record(*store,
               {LedgerUpdate{selected.sendKey, holder, 1, LedgerState::Applied, true, nowMs(), 200, {}, {},
                             QStringLiteral("req_777")}},
               {attempt(sent, holder, 1, QStringLiteral("send"), QStringLiteral("applied"), 200, 15, {}, {},
                        QStringLiteral("req_777"))});
    }
    page.refresh();
    QTRY_COMPARE(model->rowCount(), EventsModel::PageSize + 1);
    QCOMPARE(model->event(0).userId, QStringLiteral("zoe"));
    QTRY_COMPARE(page.countText(), QStringLiteral("456 events"));
    // Still the same event selected and open, now one row lower.
    QCOMPARE(page.storyKey(), selected.sendKey);
    const QModelIndexList selection = view->selectionModel()->selectedRows();
    QCOMPARE(selection.size(), 1);
    QCOMPARE(selection.constFirst().data(EventsModel::SendKeyRole).toString(), QString::fromLatin1(selected.sendKey));
    QCOMPARE(selection.constFirst().row(), selectedRow + 1);
    // Its row and its story caught up.
    QTRY_COMPARE(model->event(model->rowOfKey(selected.sendKey)).state, QStringLiteral("applied"));
    QTRY_COMPARE(page.attemptsModel()->rowCount(), 1);
    QTRY_COMPARE(page.verdictText(), QStringLiteral("Delivered once (1 partner call accepted; no duplicate deliveries)"));

    // Scrolled down the list, a refresh leaves the view where it was.
    view->verticalScrollBar()->setValue(40);
    const int scrolled = view->verticalScrollBar()->value();
    QVERIFY(scrolled > 0);
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    page.refresh();
    QTRY_VERIFY(answers.count() >= 1);
    QTest::qWait(50);
    QCOMPARE(view->verticalScrollBar()->value(), scrolled);
    QCOMPARE(page.storyKey(), selected.sendKey);
    QCOMPARE(view->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(model->rowCount(), EventsModel::PageSize + 1);

    // Rows that leave the filter leave the list, and the next page neither skips nor repeats.
    view->scrollToTop();
    auto *states = page.findChild<QComboBox *>(QStringLiteral("stateFilter"));
    states->setCurrentIndex(states->findData(QStringLiteral("claimed")));
    QVERIFY(waitForFilter(page, QString(), QStringLiteral("claimed")));
    const qint64 claimedBefore = model->total();
    QCOMPARE(claimedBefore, qint64(BulkEvents)); // less the one sent above, plus zoe's
    QList<EventRow> leaving{model->event(1), model->event(2)};
    {
        QString error;
        auto store = Store::open(m_url, &error);
        QVERIFY2(store, qPrintable(error));
        for (const EventRow &row : std::as_const(leaving)) {
            QVERIFY(row.userId == QLatin1String("bulk"));
            const QString holder = QStringLiteral("bulk-%1").arg(row.reminderId.mid(1).toInt());
            record(*store,
                   {LedgerUpdate{row.sendKey, holder, 1, LedgerState::Applied, true, nowMs(), 200, {}, {}, {}}}, {});
        }
    }
    page.refresh();
    QTRY_COMPARE(model->rowCount(), EventsModel::PageSize - 2);
    QCOMPARE(model->rowOfKey(leaving.at(0).sendKey), -1);
    QCOMPARE(model->rowOfKey(leaving.at(1).sendKey), -1);
    QTRY_COMPARE(model->total(), claimedBefore - 2);
    while (model->canFetchMore({})) {
        const int before = model->rowCount();
        model->fetchMore({});
        QTRY_VERIFY(!model->isLoading());
        QVERIFY(model->rowCount() >= before);
    }
    QCOMPARE(model->rowCount(), int(claimedBefore - 2));
    QSet<QByteArray> keys;
    for (int row = 0; row < model->rowCount(); ++row) {
        QCOMPARE(model->event(row).state, QStringLiteral("claimed"));
        QCOMPARE(model->rowOfKey(model->event(row).sendKey), row);
        keys.insert(model->event(row).sendKey);
    }
    QCOMPARE(keys.size(), model->rowCount());
}

QTEST_MAIN(TestUiEvents)
#include "tst_uievents.moc"
