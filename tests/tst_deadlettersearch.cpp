// Support finds a dead letter by what the customer tells them, end to end: real `once
// worker` processes dead-letter messages at a real `once partner-sim` (503), at a partner
// that refuses the message (400), and before any claim (an invalid message, which never
// becomes an event); two died on a 401 (our key refused) under an older worker. `once events --search` and
// `once dlq --search` find them on the command line; the console's Events page, finding no event, offers the
// dead letters the same search finds; the Dead letters page searches ids, destination,
// error text and HTTP status and tells a 401 from a 400; its from-to range is typed and
// applied on Enter, never half typed; its time columns say their zone. The store's query
// and the in-memory filter a broker's letters go through agree. Runs on SQLite and, as
// tst_deadlettersearch_postgres, on PostgreSQL (teststores.h).
#include "display/displaytime.h"
#include "display/humanunits.h"
#include "mainwindow.h"
#include "models/deadlettersmodel.h"
#include "models/eventsmodel.h"
#include "pages/deadletterspage.h"
#include "pages/eventspage.h"
#include "session/storesession.h"
#include "settings/settings.h"

#include "deliveryharness.h"
#include "model/reminder.h"
#include "store/store.h"
#include "threadedfakeserver.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

#include <memory>

using namespace once;
using namespace once::ui;
using namespace oncetest;

namespace {

QByteArray reminderJson(const QString &userId, const QString &destination)
{
    return QJsonDocument(QJsonObject{
                             {QStringLiteral("user_id"), userId},
                             {QStringLiteral("reminder_id"), QStringLiteral("r1")},
                             {QStringLiteral("scheduled_at"), QStringLiteral("2026-03-01T09:00:00Z")},
                             {QStringLiteral("destination"), destination},
                             {QStringLiteral("channel"), QStringLiteral("sms")},
                             {QStringLiteral("event_id"), QString(QStringLiteral("evt-") + userId)},
                             {QStringLiteral("body"), QStringLiteral("Your appointment is tomorrow")},
                         })
        .toJson(QJsonDocument::Compact);
}

// A message a producer sent without the fields of a reminder: dead-lettered as
// invalid-message before any claim, so it never becomes an event.
const QByteArray GhostLine =
    R"({"user_id":"ghost-user","event_id":"evt-ghost","destination":"+15550199","body":"dentist on friday"})";

QStringList column(const QAbstractItemModel *model, int column)
{
    QStringList values;
    for (int row = 0; row < model->rowCount(); ++row)
        values << model->index(row, column).data(DeadLettersModel::RawRole).toString();
    values.sort();
    return values;
}

// The window as it looks, for a person to check (ONCE_TEST_SCREENSHOTS names a folder).
void screenshot(QWidget *window, const QString &name)
{
    const QString dir = qEnvironmentVariable("ONCE_TEST_SCREENSHOTS");
    if (dir.isEmpty())
        return;
    QDir().mkpath(dir);
    QTest::qWait(200); // a last paint of what just arrived
    if (!window->grab().save(QDir(dir).filePath(name + QStringLiteral(".png"))))
        qWarning("cannot save the screenshot %s", qPrintable(name));
}

} // namespace

class TestDeadLetterSearch : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void typedTimesRead_data();
    void typedTimesRead();
    void searchFindsAMessageThatNeverBecameAnEvent();
    void deadLettersPageSearchesAndTellsStatuses();
    void storeAndBrokerFiltersAgree();
    void rangeAppliesOnEnterAndTakesTheSelection();
    void timeColumnsSayTheirZone();

private:
    bool enqueue(const QString &name, const QList<QByteArray> &lines, bool unchecked = false);
    // Runs one worker until idle against the partner at url, one attempt each.
    bool work(const QString &partnerUrl);
    bool openConsole();
    // Every kind: 2 of 503 (partner-sim), 1 of 400 (a partner that refuses the message),
    // the invalid ghost message, and 2 of 401.
    void fillEveryKind();
    QList<DeadLetter> storeLetters(const DeadLetterFilter &filter);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_url;
    std::unique_ptr<OnceRunner> m_once;
    std::unique_ptr<ThreadedFakeServer> m_refusingPartner;
    std::unique_ptr<MainWindow> m_window;
    std::unique_ptr<Store> m_store; // the test's own look at the letters
};

void TestDeadLetterSearch::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-dead-letter-search-test"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false\nonce.*.info=false"));
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    Settings().setHeaderState(QStringLiteral("deadLetters"), {});
}

void TestDeadLetterSearch::init()
{
    DisplayTime::instance().setUtc(false);
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_url = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_url);
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
    // Refuses the message for bad-* users, as a partner does.
    m_refusingPartner = std::make_unique<ThreadedFakeServer>();
    m_refusingPartner->setResponder([](const SeenRequest &request) {
        if (request.body.contains(R"("user_id":"bad-)"))
            return jsonAnswer(
                400, {{QStringLiteral("error"), QStringLiteral("destination is not a valid address")}});
        return jsonAnswer(200, {{QStringLiteral("id"), QStringLiteral("ok")}});
    });
}

void TestDeadLetterSearch::cleanup()
{
    m_window.reset();
    m_store.reset();
    m_once.reset();
    m_refusingPartner.reset();
    m_dir.reset();
    DisplayTime::instance().setUtc(false);
}

bool TestDeadLetterSearch::enqueue(const QString &name, const QList<QByteArray> &lines, bool unchecked)
{
    const QString path = m_dir->filePath(name + QStringLiteral(".jsonl"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(lines.join('\n') + '\n') < 0)
        return false;
    file.close();
    QStringList args{QStringLiteral("enqueue")};
    if (unchecked)
        args << QStringLiteral("--unchecked");
    const auto result = m_once->run(args << path);
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return result.exitedWith(0);
}

bool TestDeadLetterSearch::work(const QString &partnerUrl)
{
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl,
                                      QStringLiteral("--max-attempts"), QStringLiteral("1"),
                                      QStringLiteral("--until-idle")});
    const auto result = m_once->waitFor(worker, WorkerTimeoutMs);
    m_once->release(worker);
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return result.exitedWith(0);
}

bool TestDeadLetterSearch::openConsole()
{
    m_window = std::make_unique<MainWindow>();
    m_window->resize(1360, 820);
    m_window->show();
    m_window->openStore(m_url);
    QSignalSpy opened(m_window->session(), &StoreSession::opened);
    if (!opened.wait(20000) || !opened.constFirst().at(0).toBool()) {
        qWarning("the console did not open the store");
        return false;
    }
    return true;
}

void TestDeadLetterSearch::fillEveryKind()
{
    const quint16 simulator = m_once->startPartnerSim({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(simulator);
    QVERIFY(enqueue(QStringLiteral("outage"),
                    {reminderJson(QStringLiteral("out-0"), QStringLiteral("+15550100")),
                     reminderJson(QStringLiteral("out-1"), QStringLiteral("+15550101"))}));
    QVERIFY(enqueue(QStringLiteral("ghost"), {GhostLine}, true));
    QVERIFY(work(QStringLiteral("http://127.0.0.1:%1/reminders").arg(simulator)));
    QVERIFY(
        enqueue(QStringLiteral("refused"), {reminderJson(QStringLiteral("bad-0"), QStringLiteral("+1555"))}));
    QVERIFY(work(m_refusingPartner->url("/reminders")));
    // Two letters that died on a 401, as a worker that dead-lettered the partner's refusal of
    // our key wrote them (and a broker's dead-letter queue keeps them): a worker now holds
    // its sends while the partner refuses the key, so they are settled here through the
    // store's queue, exactly as the engine settles a dead letter.
    QVERIFY(enqueue(QStringLiteral("unauthorized"),
                    {reminderJson(QStringLiteral("auth-0"), QStringLiteral("+15550200")),
                     reminderJson(QStringLiteral("auth-1"), QStringLiteral("+15550201"))}));
    QString error;
    if (!m_store)
        m_store = Store::open(m_url, &error);
    QVERIFY2(m_store, qPrintable(error));
    const QList<QueueMessage> leased =
        m_store->queue().lease(2, 60000, QStringLiteral("an-older-worker"), &error);
    QVERIFY2(leased.size() == 2, qPrintable(error));
    QList<Settlement> settlements;
    for (const QueueMessage &message : leased) {
        const auto parsed = parseReminder(message.payload);
        QVERIFY2(parsed.reminder, qPrintable(parsed.error));
        const DeadLetterInfo info{QStringLiteral("rejected"),
                                  QStringLiteral(R"(HTTP 401: {"error":"Invalid API key"})"),
                                  1,
                                  nowMs(),
                                  nowMs(),
                                  parsed.reminder->sendKey,
                                  parsed.reminder->eventId};
        settlements.append({Settlement::Kind::DeadLetter, message.id, message.delivery, 0, info});
    }
    QVERIFY2(m_store->queue().settle(settlements, &error), qPrintable(error));
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 6);
}

QList<DeadLetter> TestDeadLetterSearch::storeLetters(const DeadLetterFilter &filter)
{
    QString error;
    if (!m_store)
        m_store = Store::open(m_url, &error);
    if (!m_store) {
        qWarning("%s", qPrintable(error));
        return {};
    }
    const auto letters = m_store->inspector().deadLetters(filter, &error);
    if (!letters)
        qWarning("%s", qPrintable(error));
    return letters.value_or(QList<DeadLetter>());
}

// --- item 8: typed times ----------------------------------------------------------------------

void TestDeadLetterSearch::typedTimesRead_data()
{
    QTest::addColumn<bool>("utc");
    QTest::addColumn<QString>("typed");
    QTest::addColumn<QString>("first"); // RFC 3339 UTC, empty: refused
    QTest::addColumn<qint64>("spanMs");
    QTest::newRow("second, UTC") << true << "2026-12-06 09:30:15"
                                 << "2026-12-06T09:30:15.000Z" << qint64(1000);
    QTest::newRow("minute, UTC") << true << "2026-12-06 09:30"
                                 << "2026-12-06T09:30:00.000Z" << qint64(60000);
    QTest::newRow("one-digit hour") << true << "2026-12-06 9:05"
                                    << "2026-12-06T09:05:00.000Z" << qint64(60000);
    QTest::newRow("day, UTC") << true << " 2026-12-06 "
                              << "2026-12-06T00:00:00.000Z" << qint64(24 * 3600 * 1000);
    QTest::newRow("with offset, shown local") << false << "2026-12-06T09:30:15+01:00"
                                              << "2026-12-06T08:30:15.000Z" << qint64(1000);
    QTest::newRow("Z with ms") << false << "2026-12-06T09:30:15.250Z"
                               << "2026-12-06T09:30:15.250Z" << qint64(1);
    QTest::newRow("half typed") << true << "2026-12-06 09:"
                                << "" << qint64(0);
    QTest::newRow("no such month") << true << "2026-13-45 25:99"
                                   << "" << qint64(0);
    QTest::newRow("words") << false << "yesterday"
                           << "" << qint64(0);
}

void TestDeadLetterSearch::typedTimesRead()
{
    QFETCH(bool, utc);
    QFETCH(QString, typed);
    QFETCH(QString, first);
    QFETCH(qint64, spanMs);
    DisplayTime::instance().setUtc(utc);
    QString error;
    const auto read = parseDisplayTime(typed, &error);
    if (first.isEmpty()) {
        QVERIFY(!read);
        // One line that says what was typed and what would read.
        QVERIFY2(error.contains(typed.trimmed()) && error.contains(QLatin1String("2026-12-06 09:30")) &&
                     !error.contains(QLatin1Char('\n')),
                 qPrintable(error));
        return;
    }
    QVERIFY2(read, qPrintable(error));
    QCOMPARE(formatTime(read->firstMs), first);
    QCOMPARE(read->lastMs - read->firstMs + 1, spanMs);
}

// --- item 5: a dead letter that never became an event is found ------------------------------

void TestDeadLetterSearch::searchFindsAMessageThatNeverBecameAnEvent()
{
    fillEveryKind();

    // The command line: no event, but the dead letter, by user, event id, destination and body.
    const auto events =
        m_once->run({QStringLiteral("events"), QStringLiteral("--search"), QStringLiteral("ghost-user")});
    QVERIFY2(events.exitedWith(0), events.describe().constData());
    QVERIFY2(events.out.trimmed().isEmpty(), events.out.constData());
    QVERIFY2(
        events.err.contains("no events match, but 1 dead letter matches: once dlq --search \"ghost-user\""),
        events.err.constData());
    const auto history = m_once->run({QStringLiteral("history"), QStringLiteral("evt-ghost")});
    QVERIFY2(history.exitedWith(1) &&
                 history.err.contains("no event with send key or event id \"evt-ghost\", but 1 "
                                      "dead letter matches: once dlq --search \"evt-ghost\""),
             history.describe().constData());
    for (const QString &search :
         {QStringLiteral("ghost-user"), QStringLiteral("evt-ghost"), QStringLiteral("+15550199"),
          QStringLiteral("body:dentist"), QStringLiteral("ghost*")}) {
        const QJsonArray found = m_once->jsonArray(
            {QStringLiteral("dlq"), QStringLiteral("--search"), search, QStringLiteral("--json")});
        QCOMPARE(found.size(), 1);
        QCOMPARE(found.first().toObject().value(QLatin1String("error_class")).toString(),
                 QStringLiteral("invalid-message"));
    }
    // A whole value, not a part of one ("ghost" is no user's id).
    QCOMPARE(m_once
                 ->jsonArray({QStringLiteral("dlq"), QStringLiteral("--search"), QStringLiteral("ghost"),
                              QStringLiteral("--json")})
                 .size(),
             0);
    // An event that exists is listed, and no hint follows.
    const auto listed =
        m_once->run({QStringLiteral("events"), QStringLiteral("--search"), QStringLiteral("out-0")});
    QVERIFY2(listed.exitedWith(0) && listed.out.contains("out-0") && listed.err.isEmpty(),
             listed.describe().constData());

    // The console: the Events page finds no event and offers the dead letter.
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *eventsPage = window.page<EventsPage>();
    window.showPage(eventsPage);
    auto *search = eventsPage->findChild<QLineEdit *>(QStringLiteral("search"));
    auto *empty = eventsPage->findChild<QLabel *>(QStringLiteral("eventsEmpty"));
    QVERIFY(search && empty);
    search->setText(QStringLiteral("ghost-user"));
    emit search->returnPressed();
    QTRY_VERIFY2(empty->isVisible() && empty->text().contains(QLatin1String("1 dead letter matches")),
                 qPrintable(empty->text()));
    QVERIFY(empty->text().startsWith(QLatin1String("No events match")));
    screenshot(&window, QStringLiteral("events-no-event-but-dead-letter"));
    emit empty->linkActivated(QStringLiteral("deadLetters"));
    auto *deadLetters = window.page<DeadLettersPage>();
    QVERIFY(deadLetters->isVisible());
    auto *table = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QCOMPARE(deadLetters->findChild<QLineEdit *>(QStringLiteral("deadLetterSearch"))->text(),
             QStringLiteral("ghost-user"));
    QTRY_COMPARE(table->model()->rowCount(), 1);
    // Found by what its message says: it never had an event id or key of its own.
    QCOMPARE(table->model()->index(0, DeadLettersModel::ErrorClass).data().toString(),
             QStringLiteral("invalid-message"));
    QTRY_COMPARE(deadLetters->findChild<QLabel *>(QStringLiteral("count"))->text(),
                 QStringLiteral("1 dead letter"));

    // A search that finds nothing anywhere says only that.
    window.showPage(eventsPage);
    search->setText(QStringLiteral("nobody-at-all"));
    emit search->returnPressed();
    QTRY_VERIFY2(empty->isVisible() && empty->text().startsWith(QLatin1String("No events match")),
                 qPrintable(empty->text()));
    QTest::qWait(300);
    QVERIFY2(!empty->text().contains(QLatin1String("dead letter")), qPrintable(empty->text()));
}

void TestDeadLetterSearch::deadLettersPageSearchesAndTellsStatuses()
{
    fillEveryKind();
    // The command line tells a 401 from a 400 too.
    QCOMPARE(m_once
                 ->jsonArray({QStringLiteral("dlq"), QStringLiteral("--http-status"), QStringLiteral("401"),
                              QStringLiteral("--json")})
                 .size(),
             2);
    const auto badStatus =
        m_once->run({QStringLiteral("dlq"), QStringLiteral("--http-status"), QStringLiteral("4o1")});
    QVERIFY2(badStatus.exitedWith(2) && badStatus.err.contains("--http-status must be a whole number"),
             badStatus.describe().constData());

    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *page = window.page<DeadLettersPage>();
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    auto *search = page->findChild<QLineEdit *>(QStringLiteral("deadLetterSearch"));
    auto *statuses = page->findChild<QComboBox *>(QStringLiteral("httpStatusFilter"));
    auto *count = page->findChild<QLabel *>(QStringLiteral("count"));
    QVERIFY(table && search && statuses && count);
    QTRY_COMPARE(table->model()->rowCount(), 6);

    // 401 apart from 400, though both are "rejected".
    statuses->setCurrentIndex(statuses->findData(401));
    QTRY_COMPARE(column(table->model(), DeadLettersModel::EventId),
                 (QStringList{QStringLiteral("evt-auth-0"), QStringLiteral("evt-auth-1")}));
    QTRY_COMPARE(count->text(), QStringLiteral("2 dead letters"));
    screenshot(&window, QStringLiteral("dead-letters-401"));
    statuses->setCurrentIndex(statuses->findData(400));
    QTRY_COMPARE(column(table->model(), DeadLettersModel::EventId), QStringList{QStringLiteral("evt-bad-0")});
    statuses->setCurrentIndex(statuses->findData(503));
    QTRY_COMPARE(table->model()->rowCount(), 2);
    statuses->setCurrentIndex(0);
    QTRY_COMPARE(table->model()->rowCount(), 6);

    // The search: applied on Enter, not while typed.
    const auto searchFor = [&](const QString &text) {
        search->clear();
        QTest::keyClicks(search, text);
        QTest::keyClick(search, Qt::Key_Return);
    };
    QTest::keyClicks(search, QStringLiteral("+155502"));
    QTest::qWait(300);
    QCOMPARE(table->model()->rowCount(), 6);
    searchFor(QStringLiteral("+15550201")); // a destination
    QTRY_COMPARE(column(table->model(), DeadLettersModel::EventId),
                 QStringList{QStringLiteral("evt-auth-1")});
    searchFor(QStringLiteral("invalid api KEY")); // the error's words, in any case
    QTRY_COMPARE(column(table->model(), DeadLettersModel::EventId),
                 (QStringList{QStringLiteral("evt-auth-0"), QStringLiteral("evt-auth-1")}));
    searchFor(QStringLiteral("503")); // an HTTP status in the error
    QTRY_COMPARE(column(table->model(), DeadLettersModel::EventId),
                 (QStringList{QStringLiteral("evt-out-0"), QStringLiteral("evt-out-1")}));
    // A message id (the store's are numbers, which an error may hold too: both are listed).
    QString messageId;
    for (const DeadLetter &letter : storeLetters({}))
        if (letter.errorClass == QLatin1String("invalid-message"))
            messageId = letter.id;
    QVERIFY(!messageId.isEmpty());
    searchFor(messageId);
    QTRY_VERIFY(column(table->model(), DeadLettersModel::MessageId).contains(messageId));
    for (const QString &id : column(table->model(), DeadLettersModel::MessageId)) {
        const QModelIndexList row =
            table->model()->match(table->model()->index(0, DeadLettersModel::MessageId),
                                  DeadLettersModel::RawRole, id, 1, Qt::MatchExactly);
        QCOMPARE(row.size(), 1);
        QVERIFY(id == messageId || row.constFirst()
                                       .siblingAtColumn(DeadLettersModel::LastError)
                                       .data(DeadLettersModel::RawRole)
                                       .toString()
                                       .contains(messageId));
    }
    // The status filter and the search together; the class list counts what both take.
    searchFor(QStringLiteral("auth*"));
    statuses->setCurrentIndex(statuses->findData(401));
    QTRY_COMPARE(table->model()->rowCount(), 2);
    auto *classes = page->findChild<QComboBox *>(QStringLiteral("errorClassFilter"));
    QTRY_COMPARE(classes->itemText(0), QStringLiteral("All error classes (2)"));
    statuses->setCurrentIndex(statuses->findData(400));
    QTRY_VERIFY(page->findChild<QLabel *>(QStringLiteral("emptyState"))->isVisible());
    QVERIFY2(page->findChild<QLabel *>(QStringLiteral("emptyState"))
                 ->text()
                 .contains(QStringLiteral("No dead letters with HTTP 400 match “auth*”")),
             qPrintable(page->findChild<QLabel *>(QStringLiteral("emptyState"))->text()));
    // Cleared, every letter again.
    statuses->setCurrentIndex(0);
    search->clear();
    QTRY_COMPARE(table->model()->rowCount(), 6);
}

void TestDeadLetterSearch::storeAndBrokerFiltersAgree()
{
    // A broker's letters are filtered in memory (DeadLetterFilter::matches), the store's
    // in SQL: the same searches take the same letters.
    fillEveryKind();
    DeadLetterFilter everything;
    everything.withPayload = true;
    const QList<DeadLetter> all = storeLetters(everything);
    QCOMPARE(all.size(), 6);
    QStringList searches{QStringLiteral("ghost-user"),      QStringLiteral("evt-auth-0"),
                         QStringLiteral("auth*"),           QStringLiteral("evt-*"),
                         QStringLiteral("+15550100"),       QStringLiteral("body:dentist"),
                         QStringLiteral("Invalid API key"), QStringLiteral("503"),
                         QStringLiteral("not json%"),       QStringLiteral("a_b"),
                         QStringLiteral("nobody")};
    for (const DeadLetter &letter : all)
        searches << letter.id << QString::fromLatin1(letter.sendKey).left(8) + QLatin1Char('*');
    for (const int status : {0, 400, 401, 503}) {
        for (const QString &text : std::as_const(searches)) {
            DeadLetterFilter filter;
            filter.text = text;
            filter.httpStatus = status;
            QStringList inSql;
            for (const DeadLetter &letter : storeLetters(filter))
                inSql << letter.id;
            QStringList inMemory;
            for (const DeadLetter &letter : deadLetterPage(all, filter))
                inMemory << letter.id;
            inSql.sort();
            inMemory.sort();
            QVERIFY2(inSql == inMemory, qPrintable(QStringLiteral("%1 with status %2: SQL %3, memory %4")
                                                       .arg(text)
                                                       .arg(status)
                                                       .arg(inSql.join(u','), inMemory.join(u','))));
        }
    }
    DeadLetterFilter byStatus;
    byStatus.httpStatus = 401;
    QCOMPARE(storeLetters(byStatus).size(), 2);
}

// --- item 8: the from-to range ----------------------------------------------------------------

void TestDeadLetterSearch::rangeAppliesOnEnterAndTakesTheSelection()
{
    fillEveryKind();
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *page = window.page<DeadLettersPage>();
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    auto *time = page->findChild<QComboBox *>(QStringLiteral("timeFilter"));
    auto *from = page->findChild<QLineEdit *>(QStringLiteral("diedFrom"));
    auto *to = page->findChild<QLineEdit *>(QStringLiteral("diedTo"));
    auto *apply = page->findChild<QPushButton *>(QStringLiteral("applyRange"));
    auto *status = page->findChild<QLabel *>(QStringLiteral("status"));
    auto *model = qobject_cast<DeadLettersModel *>(table->model());
    QVERIFY(time && from && to && apply && status && model);
    QTRY_COMPARE(table->model()->rowCount(), 6);

    // "Between…" starts at the last hour, which holds every letter.
    time->setCurrentIndex(time->findData(qint64(-1)));
    QVERIFY(from->isVisible() && to->isVisible() && apply->isVisible());
    QTRY_COMPARE(table->model()->rowCount(), 6);
    const DeadLetterFilter before = model->filter();

    // Typing changes nothing until Enter; half a time is never a filter.
    from->selectAll();
    QTest::keyClicks(from, QStringLiteral("2026-"));
    QTest::qWait(300);
    QCOMPARE(model->filter().sinceMs, before.sinceMs);
    QCOMPARE(table->model()->rowCount(), 6);
    // Enter on a time that does not read: one line says why; the list stays.
    from->setText(QStringLiteral("2026-13-45 25:99"));
    QTest::keyClick(from, Qt::Key_Return);
    QTRY_VERIFY2(status->text().contains(QStringLiteral("“2026-13-45 25:99” is not a time")),
                 qPrintable(status->text()));
    QVERIFY(!status->text().contains(QLatin1Char('\n')));
    QCOMPARE(model->filter().sinceMs, before.sinceMs);
    QCOMPARE(table->model()->rowCount(), 6);
    screenshot(&window, QStringLiteral("dead-letters-bad-time"));

    // The selected letters' range: the two 401s died after the 503s (a later worker).
    QList<DeadLetter> letters = storeLetters({});
    std::sort(letters.begin(), letters.end(),
              [](const DeadLetter &a, const DeadLetter &b) { return a.deadAtMs < b.deadAtMs; });
    table->clearSelection();
    QStringList refused;
    for (int row = 0; row < model->rowCount(); ++row) {
        if (model->letter(row).eventId.startsWith(QLatin1String("evt-auth-")) ||
            model->letter(row).eventId.startsWith(QLatin1String("evt-bad-"))) {
            table->selectionModel()->select(model->index(row, 0),
                                            QItemSelectionModel::Select | QItemSelectionModel::Rows);
            refused << model->letter(row).id;
        }
    }
    QCOMPARE(refused.size(), 3);
    auto *selectionRange = page->findChild<QAction *>(QStringLiteral("selectionRange"));
    QVERIFY(selectionRange->isEnabled());
    selectionRange->trigger();
    qint64 firstRefused = std::numeric_limits<qint64>::max();
    qint64 lastRefused = 0;
    for (const DeadLetter &letter : std::as_const(letters)) {
        if (refused.contains(letter.id)) {
            firstRefused = std::min(firstRefused, letter.deadAtMs);
            lastRefused = std::max(lastRefused, letter.deadAtMs);
        }
    }
    QCOMPARE(from->text(), formatDisplayTime(firstRefused));
    QCOMPARE(to->text(), formatDisplayTime(lastRefused));
    QVERIFY(status->text().isEmpty());
    // Every letter that died in those seconds: the three, and any other of the same seconds.
    QStringList expected;
    for (const DeadLetter &letter : std::as_const(letters))
        if (letter.deadAtMs >= firstRefused - firstRefused % 1000 &&
            letter.deadAtMs <= lastRefused - lastRefused % 1000 + 999)
            expected << letter.id;
    expected.sort();
    QTRY_COMPARE(column(table->model(), DeadLettersModel::MessageId), expected);
    screenshot(&window, QStringLiteral("dead-letters-selection-range"));

    // Typed in the zone shown, applied with the button: a minute ends at its last second.
    DisplayTime::instance().setUtc(true);
    QCOMPARE(from->text(), formatDisplayTime(firstRefused)); // the same moment, said in UTC
    const QDateTime firstUtc =
        QDateTime::fromMSecsSinceEpoch(letters.constFirst().deadAtMs, QTimeZone::utc());
    const QDateTime lastUtc = QDateTime::fromMSecsSinceEpoch(letters.constLast().deadAtMs, QTimeZone::utc());
    from->setText(firstUtc.toString(QStringLiteral("yyyy-MM-dd HH:mm")));
    to->setText(lastUtc.toString(QStringLiteral("yyyy-MM-dd HH:mm")));
    apply->click();
    QTRY_COMPARE(table->model()->rowCount(), 6);
    // A "to" before the "from" is refused in words, as before.
    to->setText(firstUtc.addSecs(-3600).toString(QStringLiteral("yyyy-MM-dd HH:mm")));
    QTest::keyClick(to, Qt::Key_Enter);
    QTRY_VERIFY2(status->text().contains(QLatin1String("The range ends before it starts")),
                 qPrintable(status->text()));
    QCOMPARE(table->model()->rowCount(), 6);
}

// --- item 10: the time columns say their zone ---------------------------------------------------

void TestDeadLetterSearch::timeColumnsSayTheirZone()
{
    fillEveryKind();
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *page = window.page<DeadLettersPage>();
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 6);
    const auto header = [table](int column) {
        return table->model()->headerData(column, Qt::Horizontal, Qt::DisplayRole).toString();
    };
    const QString local = DisplayTime::instance().zoneLabel();
    QVERIFY2(local.startsWith(QLatin1String("local, ")), qPrintable(local));
    for (const int column :
         {DeadLettersModel::FirstAttempt, DeadLettersModel::LastAttempt, DeadLettersModel::DeadAt})
        QVERIFY2(header(column).endsWith(QStringLiteral("\n(%1)").arg(local)), qPrintable(header(column)));
    QCOMPARE(header(DeadLettersModel::DeadAt), QStringLiteral("Dead at\n(%1)").arg(local));
    // Every cell of the column in the same zone as its header.
    const qint64 deadAt =
        table->model()->index(0, DeadLettersModel::DeadAt).data(DeadLettersModel::RawRole).toLongLong();
    QCOMPARE(table->model()->index(0, DeadLettersModel::DeadAt).data().toString(),
             QDateTime::fromMSecsSinceEpoch(deadAt).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")));
    screenshot(&window, QStringLiteral("dead-letters-local"));
    // View > Times in UTC: the headers and the cells follow.
    QSignalSpy headers(table->model(), &QAbstractItemModel::headerDataChanged);
    DisplayTime::instance().setUtc(true);
    QVERIFY(!headers.isEmpty());
    QCOMPARE(header(DeadLettersModel::DeadAt), QStringLiteral("Dead at\n(UTC)"));
    QCOMPARE(header(DeadLettersModel::FirstAttempt), QStringLiteral("First attempt\n(UTC)"));
    QCOMPARE(table->model()->index(0, DeadLettersModel::DeadAt).data().toString(),
             QDateTime::fromMSecsSinceEpoch(deadAt, QTimeZone::utc())
                 .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")));
    screenshot(&window, QStringLiteral("dead-letters-utc"));
}

QTEST_MAIN(TestDeadLetterSearch)
#include "tst_deadlettersearch.moc"
