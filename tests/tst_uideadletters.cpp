// The console's dead letters and in-doubt views against a real store filled through the
// core API: the table models (checked by QAbstractItemModelTester, and across reloads),
// the error-class and time filters, the redrive preview's counts and warnings, and
// redrive, discard and in-doubt decisions carried out from the pages.
#include "dialogs/decisiondialog.h"
#include "display/humanunits.h"
#include "dialogs/redrivedialog.h"
#include "mainwindow.h"
#include "models/deadlettersmodel.h"
#include "models/indoubtmodel.h"
#include "operator/deadletterfile.h"
#include "pages/deadletterspage.h"
#include "pages/eventspage.h"
#include "pages/indoubtpage.h"
#include "session/storesession.h"
#include "buriedletters.h"
#include "delivery/engine.h"
#include "partners/partnerevents.h"
#include "settings/settings.h"

#include "store/store.h"
#include "text/jsonvalues.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QScopeGuard>
#include <QSet>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <functional>
#include <memory>

#include <unistd.h>

using namespace once;
using namespace once::ui;
using oncetest::buryReminder;

namespace {

constexpr qint64 Hour = 3600 * 1000;
const QString Worker = QStringLiteral("test-worker");

Reminder makeReminder(const QString &user, const QString &reminderId)
{
    const QJsonObject object{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("body"), QStringLiteral("Reminder %1 for %2").arg(reminderId, user)},
        {QStringLiteral("event_id"), QStringLiteral("evt-%1-%2").arg(user, reminderId)},
    };
    const auto parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder does not parse: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

DeadLetter letter(const QString &id, const QString &errorClass, qint64 deadAtMs)
{
    DeadLetter letter;
    letter.id = id;
    letter.errorClass = errorClass;
    letter.lastError = QStringLiteral("error of ") + id;
    letter.sendKey = "key-" + id.toLatin1();
    letter.deadAtMs = deadAtMs;
    letter.payload = R"({"user_id":"u"})";
    return letter;
}

QStringList ids(const QList<DeadLetter> &letters)
{
    QStringList result;
    for (const auto &letter : letters)
        result << letter.id;
    return result;
}

} // namespace

class TestUiDeadLetters : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void deadLettersModelShowsLetters();
    void deadLettersModelKeepsRowsAcrossReloads();
    void deadLettersModelOutlivesItsSession();
    void inDoubtModelShowsEvents();
    void pageFiltersByErrorClassAndTime();
    void pageShowsPayloadOfSelection();
    void pageListsManyLettersAPageAtATime();
    void exportFileReadsAsOneDocument();
    void exportWritesManyLettersInTheBackground();
    void cancelledExportLeavesNoFile();
    void exportThatCannotWriteSaysWhyAndLeavesNoFile();
    void redriveDialogCountsAndWarns();
    void redriveDialogDoesNotCallARefusedCredentialPermanent();
    void redriveSelectedFromPage();
    void redriveAllMatchingTakesTheFilter();
    void redriveDialogSplitsTheLettersAndShowsThePaceLive();
    void redriveHonoursTheRate_data();
    void redriveHonoursTheRate();
    void discardAsksFirst();
    void deadLetterOpensItsEventStory();
    void emptyStates();
    void inDoubtPageResolves();
    void inDoubtPageRefusesToResendWhatThePartnerAccepted();

private:
    // Buries one reminder as a dead letter with the given class and first attempt, after
    // `redrives` earlier redrives that each died again.
    void bury(const Reminder &reminder, const QString &errorClass, qint64 firstAttemptAtMs, int redrives = 0);
    void makeInDoubt(const Reminder &reminder);
    void fillStandardSet();
    // count letters straight into the store, letter i dying (1000 + i) ms before now
    // (newest first by i), one in six of class rejected.
    void insertManyLetters(int count);
    std::unique_ptr<StoreSession> openSession();
    QList<DeadLetter> storeLetters(const DeadLetterFilter &filter = {});
    QList<AuditEntry> audit();

    QTemporaryDir m_dir;
    int m_stores = 0;
    QString m_url;
    std::unique_ptr<Store> m_store;
};

void TestUiDeadLetters::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    // Defaults, whatever an earlier run left in the test settings.
    Settings settings;
    settings.setIdempotencyWindowHours(24);
    settings.setRedriveRate(50);
    settings.setHeaderState(QStringLiteral("deadLetters"), {});
    settings.setHeaderState(QStringLiteral("inDoubt.known"), {});
}

void TestUiDeadLetters::init()
{
    m_url = QStringLiteral("sqlite:") + m_dir.filePath(QStringLiteral("store-%1.sqlite").arg(++m_stores));
    QString error;
    m_store = Store::open(m_url, &error);
    QVERIFY2(m_store, qPrintable(error));
}

void TestUiDeadLetters::cleanup()
{
    m_store.reset();
}

void TestUiDeadLetters::bury(const Reminder &reminder, const QString &errorClass, qint64 firstAttemptAtMs,
                             int redrives)
{
    QString error;
    QVERIFY2(buryReminder(*m_store, reminder, errorClass, firstAttemptAtMs, redrives, &error), qPrintable(error));
}

void TestUiDeadLetters::makeInDoubt(const Reminder &reminder)
{
    // A claim whose holder vanished, found by the next delivery under the hold policy.
    QString error;
    auto claim = [&](int delivery) {
        const auto results = m_store->ledger().claim(
            {ClaimRequest{reminder, QStringLiteral("m-") + reminder.userId, delivery, nowMs() - 1}}, Worker,
            InDoubtPolicy::Hold, &error);
        return results.size() == 1 ? results.constFirst().outcome : ClaimResult::Outcome(-1);
    };
    QCOMPARE(claim(1), ClaimResult::Outcome::Claimed);
    QCOMPARE(claim(2), ClaimResult::Outcome::Held);
}

// 10 http-5xx first sent two days ago, 15 http-5xx first sent an hour ago, 2 http-5xx
// redriven once before, 3 rejected, and one invalid message (never sent, no key).
void TestUiDeadLetters::fillStandardSet()
{
    const qint64 now = nowMs();
    for (int i = 0; i < 10; ++i)
        bury(makeReminder(QStringLiteral("old-%1").arg(i), QStringLiteral("r")), QStringLiteral("http-5xx"),
             now - 48 * Hour);
    for (int i = 0; i < 15; ++i)
        bury(makeReminder(QStringLiteral("new-%1").arg(i), QStringLiteral("r")), QStringLiteral("http-5xx"),
             now - Hour);
    for (int i = 0; i < 2; ++i)
        bury(makeReminder(QStringLiteral("again-%1").arg(i), QStringLiteral("r")), QStringLiteral("http-5xx"),
             now - 2 * Hour, 1);
    for (int i = 0; i < 3; ++i)
        bury(makeReminder(QStringLiteral("rej-%1").arg(i), QStringLiteral("r")), QStringLiteral("rejected"),
             now - Hour);
    QString error;
    QVERIFY(m_store->queue().enqueue({OutgoingMessage{"{not json", {}, {}, 0, 0}}, &error));
    const auto leased = m_store->queue().lease(1, 60000, Worker, &error);
    QCOMPARE(leased.size(), 1);
    QVERIFY(m_store->queue().settle(
        {{Settlement::Kind::DeadLetter,
          leased.constFirst().id,
          1,
          0,
          {QStringLiteral("invalid-message"), QStringLiteral("not JSON"), 0, 0, 0, {}, {}}}},
        &error));
    QCOMPARE(storeLetters().size(), 31);
}

std::unique_ptr<StoreSession> TestUiDeadLetters::openSession()
{
    auto session = std::make_unique<StoreSession>(m_url);
    QSignalSpy opened(session.get(), &StoreSession::opened);
    if (!opened.wait(10000) || !opened.constFirst().at(0).toBool())
        qWarning("the session did not open");
    return session;
}

QList<DeadLetter> TestUiDeadLetters::storeLetters(const DeadLetterFilter &filter)
{
    QString error;
    const auto letters = m_store->inspector().deadLetters(filter, &error);
    if (!letters)
        qWarning("deadLetters: %s", qPrintable(error));
    return letters.value_or(QList<DeadLetter>());
}

QList<AuditEntry> TestUiDeadLetters::audit()
{
    QString error;
    return m_store->inspector().auditLog(100, &error).value_or(QList<AuditEntry>());
}

// --- models ------------------------------------------------------------------------------

void TestUiDeadLetters::deadLettersModelShowsLetters()
{
    fillStandardSet();
    DeadLettersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const QList<DeadLetter> letters = storeLetters();
    model.setLetters(letters);
    QCOMPARE(model.rowCount(), 31);
    QCOMPARE(model.columnCount(), int(DeadLettersModel::Count));

    const DeadLetter &first = letters.constFirst();
    auto raw = [&](int column) { return model.index(0, column).data(DeadLettersModel::RawRole); };
    auto shown = [&](int column) { return model.index(0, column).data().toString(); };
    QCOMPARE(raw(DeadLettersModel::ErrorClass).toString(), first.errorClass);
    QCOMPARE(raw(DeadLettersModel::Attempts).toInt(), first.attempts);
    QCOMPARE(raw(DeadLettersModel::FirstAttempt).toLongLong(), first.firstAttemptAtMs);
    QCOMPARE(raw(DeadLettersModel::DeadAt).toLongLong(), first.deadAtMs);
    QCOMPARE(raw(DeadLettersModel::SendKey).toByteArray(), first.sendKey);
    QCOMPARE(raw(DeadLettersModel::MessageId).toString(), first.id);
    // Formatting happens only in data(): local time for people.
    QCOMPARE(shown(DeadLettersModel::FirstAttempt), QDateTime::fromMSecsSinceEpoch(first.firstAttemptAtMs)
                                                        .toLocalTime()
                                                        .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")));
    QCOMPARE(shown(DeadLettersModel::SendKey), QString::fromLatin1(first.sendKey));
    QCOMPARE(model.headerData(DeadLettersModel::LastError, Qt::Horizontal).toString(),
             QStringLiteral("Last error"));

    int redriven = 0;
    for (int row = 0; row < model.rowCount(); ++row)
        redriven +=
            model.index(row, DeadLettersModel::Redrives).data(DeadLettersModel::RawRole).toInt() > 0 ? 1 : 0;
    QCOMPARE(redriven, 2);
    // The invalid message had no key: the table says so.
    for (int row = 0; row < model.rowCount(); ++row) {
        if (model.letter(row).errorClass == QLatin1String("invalid-message"))
            QCOMPARE(model.index(row, DeadLettersModel::SendKey).data().toString(), QStringLiteral("(none)"));
    }

    // A letter whose reminder has expired says so, and what a redrive would do; one that
    // has not shows when it will; one without an expiry shows nothing.
    const qint64 now = nowMs();
    DeadLetter expired = letters.constFirst();
    expired.sendKey = makeSendKey(QStringLiteral("u"), QStringLiteral("r"), formatTime(now - 3 * Hour));
    expired.expiresAtMs = now - Hour;
    expired.keyState = QStringLiteral("dead");
    DeadLetter later = expired;
    later.expiresAtMs = now + Hour;
    DeadLetter never = expired;
    never.expiresAtMs = 0;
    model.setLetters({expired, later, never});
    const auto expires = [&](int row, int role) { return model.index(row, DeadLettersModel::Expires).data(role); };
    QCOMPARE(expires(0, Qt::DisplayRole).toString(), QStringLiteral("expired ") + formatDisplayTime(now - Hour));
    QVERIFY2(expires(0, Qt::ToolTipRole).toString().contains(QStringLiteral("(would be 3 h late): a redrive would "
                                                                             "settle it expired, not send it")),
             qPrintable(expires(0, Qt::ToolTipRole).toString()));
    QCOMPARE(expires(0, DeadLettersModel::RawRole).toLongLong(), now - Hour);
    QCOMPARE(expires(1, Qt::DisplayRole).toString(), formatDisplayTime(now + Hour));
    QCOMPARE(expires(2, Qt::DisplayRole).toString(), QString());
}

// A session that closes while a page is out (the console opening another store): the
// model lets go of it, asks nothing of it, and takes the next one.
void TestUiDeadLetters::deadLettersModelOutlivesItsSession()
{
    fillStandardSet();
    DeadLettersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto first = openSession();
    model.setSession(first.get());
    model.ensureLoaded();
    first.reset();
    model.refresh();
    model.setFilter(DeadLetterFilter());
    QCOMPARE(model.rowCount(), 0);
    const auto next = openSession();
    model.setSession(next.get());
    model.ensureLoaded();
    QTRY_COMPARE(model.rowCount(), 31);
}

void TestUiDeadLetters::deadLettersModelKeepsRowsAcrossReloads()
{
    DeadLettersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QList<DeadLetter> all;
    for (int i = 0; i < 40; ++i)
        all << letter(QString::number(i), i % 3 ? QStringLiteral("http-5xx") : QStringLiteral("rejected"),
                      1000 + i);
    model.setLetters(all.mid(0, 20));
    QCOMPARE(ids(model.rows()), ids(all.mid(0, 20)));

    // A reload that keeps most rows: the kept ones stay the same rows (persistent indexes
    // follow them), nothing is reset.
    QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
    const QPersistentModelIndex kept = model.index(10, 0);
    QList<DeadLetter> next = all.mid(5, 20);
    next.removeAt(3);
    model.setLetters(next);
    QCOMPARE(ids(model.rows()), ids(next));
    QCOMPARE(resets.count(), 0);
    QVERIFY(kept.isValid());
    QCOMPARE(model.letter(kept.row()).id, QStringLiteral("10"));

    // A changed row is updated in place.
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    next[4].lastError = QStringLiteral("changed");
    model.setLetters(next);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(model.index(4, DeadLettersModel::LastError).data().toString(), QStringLiteral("changed"));

    // Whatever comes, the model ends up exactly as told.
    auto *random = QRandomGenerator::global();
    for (int round = 0; round < 200; ++round) {
        QList<DeadLetter> wanted;
        for (const auto &candidate : std::as_const(all)) {
            if (random->bounded(3) != 0)
                wanted << candidate;
        }
        if (round % 4 == 0) // now and then in another order
            std::shuffle(wanted.begin(), wanted.end(), *random);
        model.setLetters(wanted);
        QCOMPARE(ids(model.rows()), ids(wanted));
    }
    model.setLetters({});
    QCOMPARE(model.rowCount(), 0);
}

void TestUiDeadLetters::inDoubtModelShowsEvents()
{
    const Reminder a = makeReminder(QStringLiteral("u-a"), QStringLiteral("dentist"));
    const Reminder b = makeReminder(QStringLiteral("u-b"), QStringLiteral("gym"));
    makeInDoubt(a);
    makeInDoubt(b);
    QString error;
    const auto rows = m_store->inspector().inDoubt(&error);
    QVERIFY2(rows, qPrintable(error));
    QCOMPARE(rows->size(), 2);

    InDoubtModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setEvents(*rows);
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(model.columnCount(), int(InDoubtModel::Count));
    int rowA = model.event(0).sendKey == a.sendKey ? 0 : 1;
    QCOMPARE(model.index(rowA, InDoubtModel::SendKey).data(InDoubtModel::RawRole).toByteArray(), a.sendKey);
    QCOMPARE(model.index(rowA, InDoubtModel::User).data().toString(), QStringLiteral("u-a"));
    QCOMPARE(model.index(rowA, InDoubtModel::Reminder).data().toString(), QStringLiteral("dentist"));
    QCOMPARE(model.index(rowA, InDoubtModel::EventId).data().toString(), QStringLiteral("evt-u-a-dentist"));
    QCOMPARE(model.index(rowA, InDoubtModel::Destination).data().toString(), QStringLiteral("+15550100"));
    QVERIFY(model.index(rowA, InDoubtModel::Since).data(InDoubtModel::RawRole).toLongLong() > 0);
    QCOMPARE(model.headerData(InDoubtModel::Since, Qt::Horizontal).toString(),
             QStringLiteral("In doubt since"));

    model.setEvents({rows->at(1 - rowA)});
    QCOMPARE(model.rowCount(), 1);
    QCOMPARE(model.event(0).sendKey, b.sendKey);
    model.setEvents(*rows);
    QCOMPARE(model.rowCount(), 2);
}

// --- the page ------------------------------------------------------------------------------

void TestUiDeadLetters::pageFiltersByErrorClassAndTime()
{
    fillStandardSet();
    // Two letters that died long ago, for the time filter.
    {
        QSqlQuery query(m_store->database().connection());
        QVERIFY2(
            query.exec(QStringLiteral("UPDATE dead_letters SET dead_at = dead_at - %1 WHERE id IN "
                                      "(SELECT id FROM dead_letters WHERE error_class = 'rejected' LIMIT 2)")
                           .arg(3 * 24 * Hour)),
            qPrintable(query.lastError().text()));
    }
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.resize(1200, 700);
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    auto *classes = page.findChild<QComboBox *>(QStringLiteral("errorClassFilter"));
    auto *time = page.findChild<QComboBox *>(QStringLiteral("timeFilter"));
    QVERIFY(table && classes && time);
    QTRY_COMPARE(table->model()->rowCount(), 31);

    // The class list comes from the store's counts, with "All" first.
    QTRY_COMPARE(classes->count(), 4);
    QVERIFY(classes->itemData(0).toString().isEmpty());
    QStringList names;
    for (int i = 1; i < classes->count(); ++i)
        names << classes->itemData(i).toString();
    QCOMPARE(names, (QStringList{QStringLiteral("http-5xx"), QStringLiteral("invalid-message"),
                                 QStringLiteral("rejected")}));
    QCOMPARE(classes->itemText(1), QStringLiteral("http-5xx (27)"));

    // The store filters by class.
    classes->setCurrentIndex(classes->findData(QStringLiteral("rejected")));
    QTRY_COMPARE(table->model()->rowCount(), 3);
    for (int row = 0; row < 3; ++row)
        QCOMPARE(table->model()->index(row, DeadLettersModel::ErrorClass).data().toString(),
                 QStringLiteral("rejected"));
    classes->setCurrentIndex(classes->findData(QStringLiteral("http-5xx")));
    QTRY_COMPARE(table->model()->rowCount(), 27);

    // The time filter asks the store again (dead at or after now - window).
    classes->setCurrentIndex(0);
    time->setCurrentIndex(time->findData(24 * Hour));
    QTRY_COMPARE(table->model()->rowCount(), 29);
    time->setCurrentIndex(0);
    QTRY_COMPARE(table->model()->rowCount(), 31);
    // Both filters at once; the chosen class stays chosen when a reload changes the counts.
    classes->setCurrentIndex(classes->findData(QStringLiteral("rejected")));
    time->setCurrentIndex(time->findData(Hour));
    QTRY_COMPARE(classes->itemText(classes->currentIndex()), QStringLiteral("rejected (1)"));
    QTRY_COMPARE(table->model()->rowCount(), 1);
}

void TestUiDeadLetters::pageShowsPayloadOfSelection()
{
    bury(makeReminder(QStringLiteral("u-payload"), QStringLiteral("dentist")), QStringLiteral("http-5xx"),
         nowMs());
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 1);
    // The list loaded no payload: the selection asks for it.
    QVERIFY(static_cast<DeadLettersModel *>(table->model())->letter(0).payload.isEmpty());
    table->selectRow(0);
    auto *payload = page.findChild<QPlainTextEdit *>(QStringLiteral("payload"));
    QVERIFY(payload);
    // Pretty JSON: one field a line.
    QTRY_VERIFY2(payload->toPlainText().contains(QLatin1String("\n    \"user_id\": \"u-payload\"")),
             qPrintable(payload->toPlainText()));
    auto *header = page.findChild<QLabel *>(QStringLiteral("detailsHeader"));
    QVERIFY2(header->text().contains(QLatin1String("HTTP 503: Service Unavailable (u-payload)")),
             qPrintable(header->text()));
    auto *redrive = page.findChild<QAction *>(QStringLiteral("redriveSelected"));
    QVERIFY(redrive->isEnabled());
    table->clearSelection();
    QVERIFY(!redrive->isEnabled());
    QVERIFY(payload->toPlainText().isEmpty());
}

// More letters than a page: the table loads them a page at a time as it scrolls, without
// payloads; the details load the selected letter's payload; "Redrive all matching" puts
// every one back, the reader walking them in batches no larger than one page.
void TestUiDeadLetters::insertManyLetters(int count)
{
    const qint64 now = nowMs();
    QSqlDatabase db = m_store->database().connection();
    QVERIFY(db.transaction());
    QSqlQuery insert(db);
    QVERIFY(insert.prepare(QStringLiteral(
        "INSERT INTO dead_letters (id, payload, send_key, event_id, error_class, last_error, attempts, "
        "first_attempt_at, last_attempt_at, dead_at, enqueued_at) VALUES (?, ?, ?, ?, ?, ?, 2, ?, ?, ?, ?)")));
    for (int i = 0; i < count; ++i) {
        const Reminder reminder = makeReminder(QStringLiteral("many-%1").arg(i), QStringLiteral("r"));
        insert.addBindValue(QStringLiteral("m-%1").arg(i, 5, 10, QLatin1Char('0')));
        insert.addBindValue(reminder.payload);
        insert.addBindValue(QString::fromLatin1(reminder.sendKey));
        insert.addBindValue(reminder.eventId);
        insert.addBindValue(i % 6 == 0 ? QStringLiteral("rejected") : QStringLiteral("http-5xx"));
        insert.addBindValue(QStringLiteral("HTTP 503 (%1)").arg(i));
        insert.addBindValue(now - Hour);
        insert.addBindValue(now - 2000 - i);
        insert.addBindValue(now - 1000 - i);
        insert.addBindValue(now - 2 * Hour);
        QVERIFY2(insert.exec(), qPrintable(insert.lastError().text()));
    }
    QVERIFY(db.commit());
}

void TestUiDeadLetters::pageListsManyLettersAPageAtATime()
{
    constexpr int Letters = 1200;
    insertManyLetters(Letters);
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.resize(1200, 700);
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    auto *model = qobject_cast<DeadLettersModel *>(table->model());
    QVERIFY(model);
    QSignalSpy pages(model, &DeadLettersModel::pageLoaded);
    page.show();
    page.refresh();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QTRY_VERIFY(model->rowCount() >= DeadLettersModel::PageSize);
    // A page at a time (the tester, like a view, asks for more as it looks).
    QCOMPARE(pages.constFirst().at(0).toInt(), 0);
    QCOMPARE(pages.constFirst().at(1).toInt(), DeadLettersModel::PageSize);
    // The count is the store's, not the rows loaded.
    auto *count = page.findChild<QLabel *>(QStringLiteral("count"));
    QTRY_VERIFY2(count->text().startsWith(QLatin1String("1,200 dead letters")), qPrintable(count->text()));
    auto *classes = page.findChild<QComboBox *>(QStringLiteral("errorClassFilter"));
    QTRY_COMPARE(classes->itemText(classes->findData(QStringLiteral("rejected"))), QStringLiteral("rejected (200)"));

    // Scrolling down brings the rest, newest first, each once, none with a payload.
    for (int round = 0; round < 50 && model->rowCount() < Letters; ++round) {
        table->scrollToBottom();
        QTest::qWait(20);
    }
    QCOMPARE(model->rowCount(), Letters);
    QSet<QString> seen;
    for (int row = 0; row < model->rowCount(); ++row) {
        const DeadLetter &letter = model->letter(row);
        QVERIFY(letter.payload.isEmpty());
        seen.insert(letter.id);
        if (row > 0)
            QVERIFY(model->letter(row - 1).deadAtMs > letter.deadAtMs);
    }
    QCOMPARE(seen.size(), Letters);

    // The details show the payload of the letter selected, which the list did not load; a
    // quick change of selection ends with the last one's.
    auto *payload = page.findChild<QPlainTextEdit *>(QStringLiteral("payload"));
    table->selectRow(Letters - 2);
    table->selectRow(Letters - 1);
    const QString lastUser = QStringLiteral("many-%1").arg(Letters - 1);
    QTRY_VERIFY2(payload->toPlainText().contains(QStringLiteral("\"user_id\": \"%1\"").arg(lastUser)),
                 qPrintable(payload->toPlainText()));
    QTest::qWait(100);
    QVERIFY(payload->toPlainText().contains(lastUser));

    // A refresh keeps the selection and the rows loaded.
    page.refresh();
    QTest::qWait(200);
    QCOMPARE(model->rowCount(), Letters);
    QVERIFY(table->selectionModel()->isRowSelected(Letters - 1, {}));

    // Redrive all matching: the preview counts them at the store and shows a sample.
    page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    QTRY_VERIFY(page.findChild<RedriveDialog *>());
    auto *dialog = page.findChild<RedriveDialog *>();
    QCOMPARE(dialog->letterCount(), Letters);
    QCOMPARE(dialog->sampleCount(), RedriveDialog::SampleSize);
    QVERIFY(dialog->letters().isEmpty());
    QVERIFY2(dialog->findChild<QLabel *>(QStringLiteral("permanentNote"))->text().startsWith(QLatin1String("200 of them")),
             qPrintable(dialog->findChild<QLabel *>(QStringLiteral("permanentNote"))->text()));
    dialog->setRatePerSecond(100000);
    QList<std::pair<int, int>> progress;
    connect(session.get(), &StoreSession::redriveProgress, this, [&](quint64, const RedriveProgress &step) {
        // A report of the pace alone (or of the end) moves nothing.
        if (step.taken != (progress.isEmpty() ? 0 : progress.constLast().first))
            progress.append({int(step.taken), int(step.total)});
    });
    QSignalSpy finished(session.get(), &StoreSession::redriveFinished);
    dialog->redriveButton()->click();
    QVERIFY(finished.wait(20000));
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, Letters);
    QVERIFY2(finished.constFirst().at(1).value<RedriveResult>().error.isEmpty(), qPrintable(finished.constFirst().at(1).value<RedriveResult>().error));
    QCOMPARE(storeLetters().size(), 0);
    QString error;
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(Letters));
    // However fast the rate, the reader holds one batch of at most a page at a time.
    QVERIFY(progress.size() >= 3);
    int before = 0;
    for (const auto &[done, total] : std::as_const(progress)) {
        QCOMPARE(total, Letters);
        QVERIFY2(done - before > 0 && done - before <= 500, qPrintable(QString::number(done - before)));
        before = done;
    }
    QCOMPARE(before, Letters);
    QCOMPARE(audit().constFirst().count, qint64(Letters));
    QCOMPARE(audit().constFirst().detail, QStringLiteral("all"));
    QTRY_COMPARE(model->rowCount(), 0);
}

// --- export ------------------------------------------------------------------------------

// Written in batches, the file is byte for byte the one document the console wrote whole
// before: QJsonDocument's indented array, or the CSV with its header, formula cells
// neutralised and fields quoted.
void TestUiDeadLetters::exportFileReadsAsOneDocument()
{
    QList<DeadLetter> letters;
    for (int i = 0; i < 3; ++i) {
        DeadLetter each = letter(QStringLiteral("m-%1").arg(i), QStringLiteral("http-5xx"), 1765000000000 + i);
        each.eventId = QStringLiteral("evt-%1").arg(i);
        each.firstAttemptAtMs = 1764990000000;
        letters << each;
    }
    letters[0].lastError = QStringLiteral("=HYPERLINK(\"x\"), two\nlines, \u00e9t\u00e9 \"quoted\" \\ back");
    letters[1].sendKey.clear(); // an invalid message's: null in JSON
    letters[2].eventId = QStringLiteral("+cmd|' /C calc'!A0");
    for (const qsizetype count : {0, 1, 3}) {
        const QList<DeadLetter> some = letters.mid(0, count);
        QJsonArray array;
        for (const DeadLetter &each : some)
            array.append(each.toJson());
        QCOMPARE(DeadLetterFile::render(some, DeadLetterFile::Format::Json),
                 QJsonDocument(array).toJson(QJsonDocument::Indented));
    }
    const QString csv = QString::fromUtf8(DeadLetterFile::render(letters, DeadLetterFile::Format::Csv));
    const QStringList lines = csv.split(QStringLiteral("\r\n"));
    QCOMPARE(lines.constFirst(), QStringLiteral("message_id,key,event_id,error_class,last_error,attempts,deliveries,"
                                                "redrives,first_attempt_at,last_attempt_at,dead_at,enqueued_at,expires_at,key_state"));
    QVERIFY2(csv.contains(QStringLiteral("\"'=HYPERLINK(\"\"x\"\"), two\nlines, \u00e9t\u00e9 \"\"quoted\"\" \\ back\"")),
             qPrintable(csv));
    QVERIFY2(csv.contains(QStringLiteral(",'+cmd|' /C calc'!A0,")), qPrintable(csv));
    QVERIFY(csv.endsWith(QStringLiteral("\r\n")));
    QCOMPARE(DeadLetterFile::formatFor(QStringLiteral("/x/Letters.CSV")), DeadLetterFile::Format::Csv);
    QCOMPARE(DeadLetterFile::formatFor(QStringLiteral("/x/letters.json")), DeadLetterFile::Format::Json);
}

// The export of thousands of letters is the reader's: exportTo returns before anything is
// written, the reader walks the letters in batches of at most 500 and reports each, and
// the file holds every letter once, oldest first.
void TestUiDeadLetters::exportWritesManyLettersInTheBackground()
{
    constexpr int Letters = 5000;
    insertManyLetters(Letters);
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.resize(1200, 700);
    page.show();
    page.refresh();
    auto *exportAction = page.findChild<QAction *>(QStringLiteral("exportDeadLetters"));
    QTRY_VERIFY(exportAction->isEnabled());
    auto *bar = page.findChild<QProgressBar *>(QStringLiteral("exportProgress"));
    auto *cancel = page.findChild<QPushButton *>(QStringLiteral("cancelExport"));
    QList<std::pair<int, int>> progress;
    connect(session.get(), &StoreSession::exportProgress, this,
            [&](quint64, int written, int total) { progress.append({written, total}); });
    QSignalSpy finished(&page, &DeadLettersPage::exportFinished);

    for (const QString &name : {QStringLiteral("many.csv"), QStringLiteral("many.json")}) {
        progress.clear();
        finished.clear();
        const QString path = m_dir.filePath(name);
        page.exportTo(path);
        // Nothing written on this thread: the page shows the export under way, and offers
        // to cancel it.
        QVERIFY(bar->isVisible());
        QVERIFY(cancel->isVisible() && cancel->isEnabled());
        QVERIFY(!exportAction->isEnabled());
        QVERIFY(finished.wait(60000));
        QCOMPARE(finished.constFirst().at(0).toString(), path);
        QVERIFY2(finished.constFirst().at(2).toString().isEmpty(), qPrintable(finished.constFirst().at(2).toString()));
        QCOMPARE(finished.constFirst().at(1).toInt(), Letters);
        QVERIFY(!bar->isVisible());
        QVERIFY(!cancel->isVisible());
        QVERIFY(exportAction->isEnabled());
        auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
        QVERIFY2(status->text().startsWith(QLatin1String("Exported 5,000 dead letters to")), qPrintable(status->text()));

        // A batch at a time, each reported against the letters counted at the start.
        QVERIFY2(progress.size() >= Letters / 500, qPrintable(QString::number(progress.size())));
        int before = 0;
        for (const auto &[written, total] : std::as_const(progress)) {
            QCOMPARE(total, Letters);
            QVERIFY2(written - before >= 0 && written - before <= 500, qPrintable(QString::number(written - before)));
            before = written;
        }
        QCOMPARE(before, Letters);

        QFile file(path);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray bytes = file.readAll();
        QStringList written;
        if (name.endsWith(QLatin1String(".csv"))) {
            const QList<QByteArray> lines = bytes.split('\n');
            QCOMPARE(lines.size(), Letters + 2); // the header, the letters, and nothing after the last CRLF
            for (const QByteArray &line : lines.mid(1, Letters))
                written << QString::fromUtf8(line.left(line.indexOf(',')));
        } else {
            QJsonParseError error;
            const QJsonArray array = QJsonDocument::fromJson(bytes, &error).array();
            QCOMPARE(error.error, QJsonParseError::NoError);
            for (const QJsonValue &value : array)
                written << value.toObject().value(QStringLiteral("message_id")).toString();
        }
        QCOMPARE(written.size(), Letters);
        // Oldest first: letter i died (1000 + i) ms ago.
        QCOMPARE(written.constFirst(), QStringLiteral("m-%1").arg(Letters - 1, 5, 10, QLatin1Char('0')));
        QCOMPARE(written.constLast(), QStringLiteral("m-00000"));
        QCOMPARE(QSet<QString>(written.cbegin(), written.cend()).size(), Letters);
    }
}

// A cancel stops the reader between batches and drops the temporary file: the name keeps
// what was there before, and nothing else is left in the folder.
void TestUiDeadLetters::cancelledExportLeavesNoFile()
{
    insertManyLetters(10000);
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    QTRY_VERIFY(page.findChild<QAction *>(QStringLiteral("exportDeadLetters"))->isEnabled());
    QTemporaryDir folder;
    QVERIFY(folder.isValid());
    const QString path = folder.filePath(QStringLiteral("letters.csv"));
    {
        QFile before(path);
        QVERIFY(before.open(QIODevice::WriteOnly));
        before.write("what was here before\n");
    }
    QSignalSpy finished(&page, &DeadLettersPage::exportFinished);
    QSignalSpy readerFinished(session.get(), &StoreSession::exportFinished);
    // The reader busy first (every letter, payloads and all), so that the export and its
    // cancel queue up behind it: the cancel comes before the export's second batch,
    // however slowly this thread runs.
    session->loadDeadLetters({});
    page.exportTo(path);
    auto *cancel = page.findChild<QPushButton *>(QStringLiteral("cancelExport"));
    QVERIFY(cancel->isVisible());
    cancel->click();
    QVERIFY(!cancel->isEnabled());
    QVERIFY(finished.wait(60000));
    QCOMPARE(finished.constFirst().at(1).toInt(), 0);
    QCOMPARE(finished.constFirst().at(2).toString(), QStringLiteral("cancelled"));
    QCOMPARE(readerFinished.size(), 1);
    QVERIFY(readerFinished.constFirst().at(2).toBool()); // cancelled, not finished first
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QCOMPARE(file.readAll(), QByteArray("what was here before\n"));
    QCOMPARE(QDir(folder.path()).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot),
             QStringList{QStringLiteral("letters.csv")});
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().startsWith(QLatin1String("Export cancelled")), qPrintable(status->text()));
    QVERIFY(!page.findChild<QProgressBar *>(QStringLiteral("exportProgress"))->isVisible());
}

// A path that cannot be written (its folder is a file), and a disk that fills half way:
// one line that says why, and no file, whole or half, under the name.
void TestUiDeadLetters::exportThatCannotWriteSaysWhyAndLeavesNoFile()
{
    insertManyLetters(3000);
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    QTRY_VERIFY(page.findChild<QAction *>(QStringLiteral("exportDeadLetters"))->isEnabled());
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QSignalSpy finished(&page, &DeadLettersPage::exportFinished);

    const QString notAFolder = m_dir.filePath(QStringLiteral("not-a-folder"));
    {
        QFile file(notAFolder);
        QVERIFY(file.open(QIODevice::WriteOnly));
    }
    const QString path = notAFolder + QStringLiteral("/letters.csv");
    page.exportTo(path);
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.constFirst().at(1).toInt(), 0);
    const QString error = finished.constFirst().at(2).toString();
    QVERIFY(!error.isEmpty());
    QVERIFY2(!error.contains(QLatin1Char('\n')), qPrintable(error));
    QVERIFY2(status->text().startsWith(QStringLiteral("Cannot export the dead letters to %1: ").arg(path)),
             qPrintable(status->text()));
    QVERIFY2(!status->text().contains(QLatin1Char('\n')), qPrintable(status->text()));
    QVERIFY(!QFile::exists(path));
    QVERIFY(!page.findChild<QProgressBar *>(QStringLiteral("exportProgress"))->isVisible());

    // A disk with room for a few batches: the error is the disk's, and the disk is empty
    // again (the temporary file went).
    if (::geteuid() != 0)
        QSKIP("mounting a small tmpfs needs root");
    QTemporaryDir mountPoint;
    QVERIFY(mountPoint.isValid());
    if (QProcess::execute(QStringLiteral("mount"), {QStringLiteral("-t"), QStringLiteral("tmpfs"), QStringLiteral("-o"),
                                                    QStringLiteral("size=64k"), QStringLiteral("tmpfs"), mountPoint.path()})
        != 0)
        QSKIP("cannot mount a tmpfs here");
    const auto unmount = qScopeGuard(
        [&] { QProcess::execute(QStringLiteral("umount"), {QStringLiteral("-l"), mountPoint.path()}); });
    finished.clear();
    const QString full = mountPoint.filePath(QStringLiteral("letters.json"));
    page.exportTo(full);
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.constFirst().at(1).toInt(), 0);
    QVERIFY2(finished.constFirst().at(2).toString().contains(QLatin1String("No space left on device")),
             qPrintable(finished.constFirst().at(2).toString()));
    QVERIFY2(status->text().startsWith(QStringLiteral("Cannot export the dead letters to %1: ").arg(full)),
             qPrintable(status->text()));
    QCOMPARE(QDir(mountPoint.path()).entryList(QDir::Files | QDir::Hidden | QDir::NoDotAndDotDot), QStringList());
}

void TestUiDeadLetters::redriveDialogCountsAndWarns()
{
    fillStandardSet();
    const QList<DeadLetter> letters = storeLetters();
    RedriveDialog dialog(letters, QStringLiteral("all"), 24, 75);
    QCOMPARE(dialog.letterCount(), 31);
    QCOMPARE(dialog.sampleCount(), RedriveDialog::SampleSize);
    QCOMPARE(dialog.redrivenBeforeCount(), 2);
    // The ten first sent two days ago; the invalid message was never sent.
    QCOMPARE(dialog.outsideIdempotencyWindowCount(), 10);
    QVERIFY(dialog.showsIdempotencyWarning());
    auto *warning = dialog.findChild<QLabel *>(QStringLiteral("idempotencyWarning"));
    QVERIFY(warning->text().contains(QLatin1String("the partner may have forgotten their keys"),
                                     Qt::CaseInsensitive));
    QVERIFY(warning->text().contains(QLatin1String("10 of them")));
    // Rejected and invalid ones die again unless their cause was fixed: the preview says so.
    auto *permanent = dialog.findChild<QLabel *>(QStringLiteral("permanentNote"));
    QVERIFY(permanent);
    QVERIFY2(permanent->text().startsWith(QLatin1String("4 of them died of a permanent error")),
             qPrintable(permanent->text()));
    QCOMPARE(dialog.ratePerSecond(), 75);
    QCOMPARE(dialog.redriveButton()->text(), QStringLiteral("Redrive 31"));

    // A wider window: nothing is outside it.
    RedriveDialog wide(letters, QStringLiteral("all"), 72, 50);
    QCOMPARE(wide.outsideIdempotencyWindowCount(), 0);
    QVERIFY(!wide.showsIdempotencyWarning());

    // Only the fresh ones: no warning, nothing redriven before, all of them in the sample.
    QList<DeadLetter> fresh;
    for (const auto &candidate : letters) {
        if (candidate.sendKey.contains("new-"))
            fresh << candidate;
    }
    RedriveDialog small(fresh, QStringLiteral("selected 15"), 24, 50);
    QCOMPARE(small.letterCount(), 15);
    QCOMPARE(small.sampleCount(), 15);
    QCOMPARE(small.redrivenBeforeCount(), 0);
    QVERIFY(!small.showsIdempotencyWarning());
    QVERIFY(!small.findChild<QLabel *>(QStringLiteral("permanentNote")));
    QCOMPARE(small.redriveButton()->text(), QStringLiteral("Redrive 15"));
    QCOMPARE(small.auditDetail(), QStringLiteral("selected 15"));
}

// Letters rejected with 401 died of the partner refusing everyone (before such answers
// were a partner-wide outage): "they die again at once" was wrong of them. The selected
// letters' preview and the matching letters' counts (SQL) agree.
void TestUiDeadLetters::redriveDialogDoesNotCallARefusedCredentialPermanent()
{
    QString error;
    const QStringList errors{QStringLiteral("HTTP 401: invalid or expired token"),
                             QStringLiteral("HTTP 403: forbidden"),
                             QStringLiteral("gave up after 2 attempts: HTTP 401"),
                             QStringLiteral("HTTP 400: destination is not a valid number"),
                             QStringLiteral("HTTP 400: body too long: 401 characters")};
    for (const QString &lastError : errors) {
        QVERIFY(m_store->queue().enqueue({OutgoingMessage{R"({"user_id":"u"})", {}, {}, 0, 0}}, &error));
        const auto leased = m_store->queue().lease(1, 60000, Worker, &error);
        QCOMPARE(leased.size(), 1);
        QVERIFY2(m_store->queue().settle({{Settlement::Kind::DeadLetter,
                                           leased.constFirst().id,
                                           1,
                                           0,
                                           {QStringLiteral("rejected"), lastError, 1, 0, 0, {}, {}}}},
                                         &error),
                 qPrintable(error));
    }
    const QList<DeadLetter> letters = storeLetters();
    QCOMPARE(letters.size(), errors.size());

    RedriveDialog selected(letters, QStringLiteral("selected 5"), 24, 50);
    auto *permanent = selected.findChild<QLabel *>(QStringLiteral("permanentNote"));
    auto *credentials = selected.findChild<QLabel *>(QStringLiteral("credentialsNote"));
    QVERIFY(permanent && credentials);
    QVERIFY2(permanent->text().startsWith(QLatin1String("2 of them died of a permanent error")),
             qPrintable(permanent->text()));
    QVERIFY2(credentials->text().startsWith(QLatin1String("3 of them died of a refused credential")),
             qPrintable(credentials->text()));

    const auto counts = m_store->inspector().countDeadLetters({}, nowMs(), &error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->tally().credentialsRefused, 3);
    RedriveDialog matching(RedriveSelection::of(*counts, {}, letters), QStringLiteral("all"), 24, 50);
    QVERIFY(matching.findChild<QLabel *>(QStringLiteral("permanentNote"))
                ->text()
                .startsWith(QLatin1String("2 of them died of a permanent error")));
    QVERIFY(matching.findChild<QLabel *>(QStringLiteral("credentialsNote")));
}

void TestUiDeadLetters::redriveSelectedFromPage()
{
    fillStandardSet();
    Settings().setRedriveRate(1000);
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 31);

    // Select the two that were redriven before, and one more.
    QList<QByteArray> keys;
    for (int row = 0; row < table->model()->rowCount(); ++row) {
        const QByteArray key = table->model()
                                   ->index(row, DeadLettersModel::SendKey)
                                   .data(DeadLettersModel::RawRole)
                                   .toByteArray();
        if (key.contains("again-") || key.contains("new-3")) {
            table->selectionModel()->select(table->model()->index(row, 0),
                                            QItemSelectionModel::Select | QItemSelectionModel::Rows);
            keys << key;
        }
    }
    QCOMPARE(keys.size(), 3);
    page.findChild<QAction *>(QStringLiteral("redriveSelected"))->trigger();
    auto *dialog = page.findChild<RedriveDialog *>();
    QVERIFY(dialog);
    QVERIFY(dialog->isVisible());
    QCOMPARE(dialog->letterCount(), 3);
    QCOMPARE(dialog->redrivenBeforeCount(), 2);
    QVERIFY(!dialog->showsIdempotencyWarning());
    QCOMPARE(dialog->ratePerSecond(), 1000);
    QCOMPARE(dialog->redriveButton()->text(), QStringLiteral("Redrive 3"));

    QSignalSpy finished(session.get(), &StoreSession::redriveFinished);
    dialog->redriveButton()->click();
    QVERIFY(finished.wait(10000));
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, 3);
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().contains(QLatin1String("Put 3 of 3")), qPrintable(status->text()));
    QTRY_COMPARE(table->model()->rowCount(), 28);
    DeadLetterFilter byKey;
    byKey.sendKeys = keys;
    QCOMPARE(storeLetters(byKey).size(), 0);
    QString error;
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(3));
    const auto entries = audit();
    QVERIFY(!entries.isEmpty());
    QCOMPARE(entries.constFirst().action, QStringLiteral("redrive"));
    QCOMPARE(entries.constFirst().detail,
             QStringLiteral("keys %1, %2, %3")
                 .arg(QString::fromLatin1(keys.at(0)), QString::fromLatin1(keys.at(1)), QString::fromLatin1(keys.at(2))));
    QCOMPARE(entries.constFirst().count, qint64(3));
    Settings().setRedriveRate(50);
}

void TestUiDeadLetters::redriveHonoursTheRate_data()
{
    QTest::addColumn<int>("rate");
    QTest::addColumn<int>("letters");
    // Each run is meant to take 3 to 4.5 s, so the tick (0.1 s) is within the 10 %.
    QTest::newRow("1 per second") << 1 << 3;
    QTest::newRow("2 per second, 9 letters") << 2 << 9; // redrove in 1.5 s when a floor held it at 10/s
    QTest::newRow("7 per second") << 7 << 21;
    QTest::newRow("40 per second") << 40 << 120;
}

// Letter k goes back at (k + 1) / rate seconds: N letters take N / rate seconds, and no
// letter leaves before its moment, so the partner sees the rate the operator chose.
void TestUiDeadLetters::redriveHonoursTheRate()
{
    QFETCH(int, rate);
    QFETCH(int, letters);
    for (int i = 0; i < letters; ++i)
        bury(makeReminder(QStringLiteral("paced-%1").arg(i), QStringLiteral("r")), QStringLiteral("http-5xx"), 0);
    const QList<DeadLetter> buried = storeLetters();
    QCOMPARE(buried.size(), letters);
    auto session = openSession();
    QSignalSpy finished(session.get(), &StoreSession::redriveFinished);
    QList<std::pair<int, qint64>> progress; // letters moved so far, ms since the start
    QElapsedTimer sinceStart;
    connect(session.get(), &StoreSession::redriveProgress, this,
            [&](quint64, const RedriveProgress &step) { progress.append({int(step.moved), sinceStart.elapsed()}); });
    sinceStart.start();
    RedriveOptions options;
    options.picked = buried;
    options.ceilingPerSecond = rate;
    options.detail = QStringLiteral("paced");
    session->redrive(options);
    QVERIFY(finished.wait(letters * 1000 / rate + 10000));
    const qint64 tookMs = sinceStart.elapsed();
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, letters);
    QCOMPARE(storeLetters().size(), 0);

    const qint64 meantMs = qint64(letters) * 1000 / rate;
    QVERIFY2(tookMs >= meantMs * 9 / 10 && tookMs <= meantMs * 11 / 10,
             qPrintable(QStringLiteral("%1 letters at %2/s took %3 ms, meant %4 ms")
                            .arg(QString::number(letters), QString::number(rate), QString::number(tookMs),
                                 QString::number(meantMs))));
    for (const auto &[moved, atMs] : std::as_const(progress)) {
        // The session reports after the letters moved, so atMs is never before their moment.
        QVERIFY2(atMs >= qint64(moved) * 1000 / rate,
                 qPrintable(QStringLiteral("%1 letters moved after %2 ms, ahead of the rate")
                                .arg(QString::number(moved), QString::number(atMs))));
    }
}

// The preview asks the store what the letters would come to now: 26 sent, 1 already
// applied (a provider's delivered event settled it after it died), 3 expired (named, with
// how late they would be). The run then shows its pace live: a worker on the store says
// in its heartbeat that its partner throttles it at 5 a second, and the redrive, whose
// ceiling is 100, goes at that pace and says why. The expired three stay dead letters.
// With ONCE_SCREENSHOTS=DIR the dialog is saved there, before and during the run.
void TestUiDeadLetters::redriveDialogSplitsTheLettersAndShowsThePaceLive()
{
    for (int i = 0; i < 27; ++i)
        bury(makeReminder(QStringLiteral("split-%1").arg(i), QStringLiteral("r")), QStringLiteral("http-5xx"), 0);
    for (int i = 0; i < 3; ++i) {
        const QJsonObject object{
            {QStringLiteral("user_id"), QStringLiteral("stale-%1").arg(i)},
            {QStringLiteral("reminder_id"), QStringLiteral("dentist")},
            {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
            {QStringLiteral("expires_at"), QStringLiteral("2026-12-01T10:00:00Z")},
            {QStringLiteral("destination"), QStringLiteral("+15550100")},
            {QStringLiteral("body"), QStringLiteral("Your dentist at 10:00")},
        };
        const auto parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
        QVERIFY2(parsed.reminder, qPrintable(parsed.error));
        bury(*parsed.reminder, QStringLiteral("http-5xx"), 0);
    }
    QString error;
    PartnerEvent delivered;
    delivered.carriedKey = makeReminder(QStringLiteral("split-0"), QStringLiteral("r")).sendKey;
    delivered.kind = PartnerEvent::Kind::Delivered;
    delivered.eventId = QStringLiteral("evt-split-0");
    const auto recorded = m_store->operations().recordPartnerEvent(delivered, QStringLiteral("acme"), QStringLiteral("webhook"),
                                                                   QStringLiteral("Webhook"), &error);
    QVERIFY2(recorded && recorded->settled, qPrintable(error));
    // A worker on the store, throttled by its partner: what its heartbeat writes.
    WorkerRecord worker;
    worker.id = QStringLiteral("paced-worker");
    worker.host = QStringLiteral("here");
    worker.pid = QCoreApplication::applicationPid();
    worker.partner = QStringLiteral("acme");
    worker.startedAtMs = nowMs();
    worker.heartbeatAtMs = nowMs();
    QVERIFY2(m_store->workers().announce(worker, &error), qPrintable(error));
    EngineCounters counters;
    PartnerCounters acme;
    acme.name = QStringLiteral("acme");
    acme.profile = QStringLiteral("webhook");
    acme.throttledAtMs = nowMs();
    acme.paceNowPerSecond = 5;
    counters.partners = {acme};
    counters.running = true;
    QVERIFY2(m_store->workers().heartbeat(worker.id, QStringLiteral("running"), counters, &error), qPrintable(error));

    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.resize(1200, 800);
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 30);
    QTRY_VERIFY(page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->isEnabled());
    page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    QTRY_VERIFY(page.findChild<RedriveDialog *>());
    auto *dialog = page.findChild<RedriveDialog *>();
    QTRY_COMPARE(dialog->splitText(),
                 QStringLiteral("26 sent · 1 already applied (suppressed as duplicates) · 3 expired"));
    auto *names = dialog->findChild<QLabel *>(QStringLiteral("expiredNames"));
    QVERIFY(names->isVisible());
    QVERIFY2(names->text().contains(QLatin1String("stale-0:dentist:2026-12-01T09:00:00Z (expired "))
                 && names->text().contains(QLatin1String(" late)")),
             qPrintable(names->text()));
    QVERIFY(dialog->findChild<QCheckBox *>(QStringLiteral("includeExpired"))->isEnabled());
    QVERIFY(!dialog->includeExpired());
    const QString shots = qEnvironmentVariable("ONCE_SCREENSHOTS");
    if (!shots.isEmpty())
        dialog->grab().save(shots + QStringLiteral("/redrive-preview.png"));

    dialog->setRatePerSecond(100);
    QSignalSpy finished(session.get(), &StoreSession::redriveFinished);
    dialog->redriveButton()->click();
    QVERIFY(dialog->isRunning());
    QTRY_VERIFY_WITH_TIMEOUT(dialog->paceText().contains(QLatin1String("slowed to 5.0 a second")), 10000);
    QVERIFY2(dialog->paceText().contains(QLatin1String("acme throttles the workers")), qPrintable(dialog->paceText()));
    // At 5 a second, not 100: after a second and a half it has moved far fewer than 150.
    QTest::qWait(1500);
    const qint64 movedSoFar = 30 - storeLetters().size();
    QVERIFY2(movedSoFar >= 3 && movedSoFar <= 15, qPrintable(QString::number(movedSoFar)));
    if (!shots.isEmpty())
        dialog->grab().save(shots + QStringLiteral("/redrive-running.png"));
    QVERIFY(finished.wait(20000));
    const auto result = finished.constFirst().at(1).value<RedriveResult>();
    QCOMPARE(result.moved, qint64(27));
    QCOMPARE(result.skippedExpired, qint64(3));
    QVERIFY2(result.error.isEmpty(), qPrintable(result.error));
    // The three expired are still dead letters; the run's audit row says it skipped them.
    QCOMPARE(storeLetters().size(), 3);
    QVERIFY2(audit().constFirst().detail.endsWith(QLatin1String("(skipped 3 expired)")),
             qPrintable(audit().constFirst().detail));
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().contains(QLatin1String("3 expired, skipped: still dead letters.")), qPrintable(status->text()));
}

void TestUiDeadLetters::redriveAllMatchingTakesTheFilter()
{
    fillStandardSet();
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    auto *classes = page.findChild<QComboBox *>(QStringLiteral("errorClassFilter"));
    QTRY_COMPARE(table->model()->rowCount(), 31);
    QTRY_VERIFY(classes->findData(QStringLiteral("rejected")) > 0);
    classes->setCurrentIndex(classes->findData(QStringLiteral("rejected")));
    QTRY_COMPARE(table->model()->rowCount(), 3);
    page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    // The page asks the store to count the matching letters first.
    QTRY_VERIFY(page.findChild<RedriveDialog *>());
    auto *dialog = page.findChild<RedriveDialog *>();
    QCOMPARE(dialog->letterCount(), 3);
    QCOMPARE(dialog->auditDetail(), QStringLiteral("all error-class=rejected"));

    // Cancel changes nothing.
    dialog->reject();
    QTRY_VERIFY(!page.findChild<RedriveDialog *>());
    QCOMPARE(storeLetters().size(), 31);

    // With a time filter the detail says since when; a slow rate shows progress and can be cancelled.
    auto *time = page.findChild<QComboBox *>(QStringLiteral("timeFilter"));
    time->setCurrentIndex(time->findData(24 * Hour));
    QTRY_VERIFY(classes->findData(QStringLiteral("http-5xx")) > 0);
    classes->setCurrentIndex(classes->findData(QStringLiteral("http-5xx")));
    QTRY_COMPARE(table->model()->rowCount(), 27);
    page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    QTRY_VERIFY(page.findChild<RedriveDialog *>());
    dialog = page.findChild<RedriveDialog *>();
    QCOMPARE(dialog->letterCount(), 27);
    QVERIFY(dialog->auditDetail().startsWith(QLatin1String("all error-class=http-5xx since=")));
    dialog->setRatePerSecond(10); // one letter a tick
    QSignalSpy progress(session.get(), &StoreSession::redriveProgress);
    QSignalSpy finished(session.get(), &StoreSession::redriveFinished);
    dialog->redriveButton()->click();
    auto *bar = page.findChild<QProgressBar *>(QStringLiteral("redriveProgress"));
    auto *cancel = page.findChild<QPushButton *>(QStringLiteral("cancelRedrive"));
    QVERIFY(bar->isVisible());
    QVERIFY(cancel->isVisible());
    QVERIFY(!page.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->isEnabled());
    QTRY_VERIFY(progress.count() >= 2);
    QTRY_VERIFY(bar->value() >= 2);
    cancel->click();
    QVERIFY(finished.wait(5000));
    QVERIFY(finished.constFirst().at(1).value<RedriveResult>().cancelled); // cancelled
    const int moved = finished.constFirst().at(1).value<RedriveResult>().moved;
    QVERIFY2(moved >= 2 && moved < 27, qPrintable(QString::number(moved)));
    QVERIFY(!bar->isVisible());
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().contains(QLatin1String("cancelled")), qPrintable(status->text()));
    QTRY_COMPARE(table->model()->rowCount(), 27 - moved);
    QCOMPARE(storeLetters().size(), 31 - moved);
    QVERIFY(audit().constFirst().detail.endsWith(QLatin1String("(cancelled)")));
}

void TestUiDeadLetters::discardAsksFirst()
{
    fillStandardSet();
    auto session = openSession();
    DeadLettersPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 31);
    table->selectionModel()->select(QItemSelection(table->model()->index(0, 0), table->model()->index(1, 0)),
                                    QItemSelectionModel::Select | QItemSelectionModel::Rows);
    auto *discard = page.findChild<QAction *>(QStringLiteral("discard"));

    // Cancel: nothing happens.
    discard->trigger();
    auto *box = page.findChild<DecisionDialog *>();
    QVERIFY(box);
    QVERIFY(box->text().contains(QLatin1String("Discard 2 dead letters?")));
    QVERIFY(!box->confirmButton()->isDefault() && !box->confirmButton()->autoDefault());
    box->cancelButton()->click();
    QTRY_VERIFY(!page.findChild<DecisionDialog *>());
    QCOMPARE(storeLetters().size(), 31);

    discard->trigger();
    box = page.findChild<DecisionDialog *>();
    QSignalSpy done(session.get(), &StoreSession::operationFinished);
    box->confirmButton()->click();
    QVERIFY(done.wait(5000));
    QVERIFY(done.constFirst().at(1).toBool());
    QTRY_COMPARE(table->model()->rowCount(), 29);
    QCOMPARE(storeLetters().size(), 29);
    QCOMPARE(audit().constFirst().action, QStringLiteral("discard"));
    // The audit log names the letters (a message that never parsed by its id).
    QVERIFY2(audit().constFirst().detail.startsWith(QLatin1String("keys ")), qPrintable(audit().constFirst().detail));
    QCOMPARE(audit().constFirst().count, qint64(2));
    QVERIFY(
        page.findChild<QLabel *>(QStringLiteral("status"))->text().contains(QLatin1String("discarded 2")));
}

void TestUiDeadLetters::deadLetterOpensItsEventStory()
{
    fillStandardSet();
    MainWindow window;
    window.resize(1280, 820);
    window.show();
    window.openStore(m_url);
    QSignalSpy opened(window.session(), &StoreSession::opened);
    QVERIFY(opened.wait(10000));
    QVERIFY(opened.constFirst().at(0).toBool());
    auto *page = window.page<DeadLettersPage>();
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 31);
    auto *openStory = page->findChild<QAction *>(QStringLiteral("openStory"));
    QVERIFY(table->actions().contains(openStory)); // in the context menu
    const auto rowWhere = [&](const std::function<bool(const QByteArray &)> &matches) {
        for (int row = 0; row < table->model()->rowCount(); ++row) {
            if (matches(table->model()->index(row, DeadLettersModel::SendKey).data(DeadLettersModel::RawRole).toByteArray()))
                return row;
        }
        return -1;
    };

    // The message that was never a reminder has no event to open.
    table->selectRow(rowWhere([](const QByteArray &key) { return key.isEmpty(); }));
    QVERIFY(!openStory->isEnabled());

    const QByteArray key = makeReminder(QStringLiteral("new-3"), QStringLiteral("r")).sendKey;
    table->selectRow(rowWhere([&](const QByteArray &each) { return each == key; }));
    QVERIFY(openStory->isEnabled());
    openStory->trigger();
    auto *events = window.page<EventsPage>();
    QVERIFY(events->isVisible());
    QCOMPARE(events->storyKey(), key);
    QTRY_VERIFY(events->storyLoaded());
    QVERIFY2(events->verdictText().startsWith(QLatin1String("Dead-lettered: not delivered")),
             qPrintable(events->verdictText()));

    // A double-click does the same.
    window.showPage(page);
    const QByteArray other = makeReminder(QStringLiteral("rej-1"), QStringLiteral("r")).sendKey;
    const int row = rowWhere([&](const QByteArray &each) { return each == other; });
    QVERIFY(row >= 0);
    table->scrollTo(table->model()->index(row, 1));
    const QRect cell = table->visualRect(table->model()->index(row, 1));
    QTest::mouseClick(table->viewport(), Qt::LeftButton, {}, cell.center());
    QTest::mouseDClick(table->viewport(), Qt::LeftButton, {}, cell.center());
    QTRY_COMPARE(events->storyKey(), other);
    QVERIFY(events->isVisible());
    QTRY_VERIFY(events->storyLoaded());
}

void TestUiDeadLetters::emptyStates()
{
    auto session = openSession();
    DeadLettersPage deadLetters;
    InDoubtPage inDoubt;
    deadLetters.setSession(session.get());
    inDoubt.setSession(session.get());
    deadLetters.show();
    inDoubt.show();
    deadLetters.refresh();
    inDoubt.refresh();
    auto *empty = deadLetters.findChild<QLabel *>(QStringLiteral("emptyState"));
    QTRY_VERIFY(empty->isVisible());
    QTRY_VERIFY2(empty->text().contains(QLatin1String("No dead letters")), qPrintable(empty->text()));
    auto *nothingInDoubt = inDoubt.findChild<QLabel *>(QStringLiteral("emptyState"));
    QTRY_VERIFY2(nothingInDoubt->text().contains(QLatin1String("Nothing is in doubt")),
                 qPrintable(nothingInDoubt->text()));
    QVERIFY(!deadLetters.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->isEnabled());
    QVERIFY(!inDoubt.findChild<QAction *>(QStringLiteral("resend"))->isEnabled());

    // A letter arrives: the table replaces the empty state on the next refresh.
    bury(makeReminder(QStringLiteral("late"), QStringLiteral("r")), QStringLiteral("http-5xx"), nowMs());
    deadLetters.refresh();
    QTRY_VERIFY(!empty->isVisible());
    QVERIFY(deadLetters.findChild<QAction *>(QStringLiteral("redriveAllMatching"))->isEnabled());
}

void TestUiDeadLetters::inDoubtPageResolves()
{
    const Reminder a = makeReminder(QStringLiteral("u-a"), QStringLiteral("dentist"));
    const Reminder b = makeReminder(QStringLiteral("u-b"), QStringLiteral("gym"));
    makeInDoubt(a);
    makeInDoubt(b);
    auto session = openSession();
    InDoubtPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("inDoubt"));
    QTRY_COMPARE(table->model()->rowCount(), 2);
    auto rowOf = [&](const QByteArray &key) {
        for (int row = 0; row < table->model()->rowCount(); ++row) {
            if (table->model()->index(row, InDoubtModel::SendKey).data(InDoubtModel::RawRole).toByteArray() ==
                key)
                return row;
        }
        return -1;
    };

    table->selectRow(rowOf(a.sendKey));
    page.findChild<QAction *>(QStringLiteral("markDelivered"))->trigger();
    auto *box = page.findChild<DecisionDialog *>();
    QVERIFY(box);
    QVERIFY2(box->informativeText().contains(QLatin1String("records a delivery that nobody saw")),
             qPrintable(box->informativeText()));
    box->findChild<QPushButton *>(QStringLiteral("confirm"))->click();
    QTRY_COMPARE(table->model()->rowCount(), 1);
    QString error;
    QCOMPARE(m_store->inspector().event(QString::fromLatin1(a.sendKey), &error)->state,
             QString(LedgerState::Applied));
    QVERIFY(page.findChild<QLabel *>(QStringLiteral("status"))
                ->text()
                .contains(QLatin1String("1 reminder marked delivered")));

    table->selectRow(rowOf(b.sendKey));
    page.findChild<QAction *>(QStringLiteral("resend"))->trigger();
    box = page.findChild<DecisionDialog *>();
    QVERIFY(
        box->informativeText().contains(QLatin1String("A partner without idempotency delivers it again")));
    box->findChild<QPushButton *>(QStringLiteral("confirm"))->click();
    QTRY_COMPARE(table->model()->rowCount(), 0);
    QCOMPARE(m_store->inspector().event(QString::fromLatin1(b.sendKey), &error)->state,
             QString(LedgerState::Retrying));
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(1));
    // No worker runs on this store: the page must not promise a send.
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QTRY_VERIFY2(status->text().contains(QLatin1String("It waits for a worker: none is running on this store")),
                 qPrintable(status->text()));
    QVERIFY2(status->text().contains(QLatin1String("1 reminder queued again under the same key")),
             qPrintable(status->text()));
    QTRY_VERIFY(page.findChild<QLabel *>(QStringLiteral("emptyState"))->isVisible());
    const auto entries = audit();
    QCOMPARE(entries.size(), 2);
    QCOMPARE(entries.at(0).action, QStringLiteral("resolve-resend"));
    QCOMPARE(entries.at(1).action, QStringLiteral("resolve-mark-delivered"));
}

// A ledger that says in doubt beside a history that holds the partner's 2xx (a store an
// older once wrote): the page says what is known, and a resend is refused, loudly.
void TestUiDeadLetters::inDoubtPageRefusesToResendWhatThePartnerAccepted()
{
    const Reminder accepted = makeReminder(QStringLiteral("u-a"), QStringLiteral("dentist"));
    makeInDoubt(accepted);
    QString error;
    const Attempt send{accepted.sendKey, accepted.eventId, QStringLiteral("m-u-a"), 1, Worker, nowMs() - 1000,
                       QStringLiteral("send"), QStringLiteral("applied"), 200, 40, {}, {}, QStringLiteral("req_7")};
    QVERIFY2(m_store->ledger().insertAttempts({send}, &error), qPrintable(error));
    auto session = openSession();
    InDoubtPage page;
    page.setSession(session.get());
    page.show();
    page.refresh();
    auto *table = page.findChild<QTableView *>(QStringLiteral("inDoubt"));
    QTRY_COMPARE(table->model()->rowCount(), 1);
    const QString known = table->model()->index(0, InDoubtModel::Known).data().toString();
    QVERIFY2(known.startsWith(QLatin1String("claimed by ")) && known.contains(QLatin1String("may have been sent")),
             qPrintable(known));

    table->selectRow(0);
    page.findChild<QAction *>(QStringLiteral("resend"))->trigger();
    page.findChild<DecisionDialog *>()->confirmButton()->click();
    auto *status = page.findChild<QLabel *>(QStringLiteral("status"));
    QTRY_VERIFY2(status->text().contains(QLatin1String("1 failed")), qPrintable(status->text()));
    QVERIFY2(status->text().contains(QLatin1String("the partner answered HTTP 200 to a send at")),
             qPrintable(status->text()));
    QCOMPARE(m_store->inspector().event(QString::fromLatin1(accepted.sendKey), &error)->state,
             QString(LedgerState::InDoubt));
    QCOMPARE(m_store->queue().counts(&error)->ready, qint64(0));
    QCOMPARE(table->model()->rowCount(), 1);
}

QTEST_MAIN(TestUiDeadLetters)
#include "tst_uideadletters.moc"
