// The Events page's model over more rows than it keeps: pages far from what a view shows
// are let go and loaded again by their list position when the view comes back to them,
// so that memory follows the screen, not the depth of the scroll.
#include "models/eventsmodel.h"
#include "pages/eventspage.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "store/store.h"
#include "teststores.h"

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QHeaderView>
#include <QLoggingCategory>
#include <QScrollBar>
#include <QSet>
#include <QSignalSpy>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardItemModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace once::ui;

namespace {

// Twenty pages; one event in four is dead, so the dead alone make five pages.
constexpr int Events = 20 * EventsModel::PageSize;
constexpr int PageSize = EventsModel::PageSize;

// Loads every page, as a view scrolled to the bottom would.
bool scrollToEnd(EventsModel &model)
{
    model.ensureLoaded();
    return QTest::qWaitFor(
        [&] {
            if (!model.hasLoaded() || model.isLoading())
                return false;
            if (!model.canFetchMore({}))
                return true;
            model.fetchMore({});
            return false;
        },
        60000);
}

// Waits for the row's page, asking for it as a view painting the row would (data() on its
// first column). A page that comes back shorter brings the next page's rows up to this
// row: they are asked for in turn. False if the row is gone, or never came.
bool waitForRow(EventsModel &model, int row)
{
    return QTest::qWaitFor(
               [&] {
                   if (row >= model.rowCount() || model.isResident(row))
                       return true;
                   model.index(row, EventsModel::State).data();
                   return false;
               },
               30000)
        && row < model.rowCount();
}

// Every row's send key, top to bottom, each evicted page loaded again on the way.
QList<QByteArray> keysOf(EventsModel &model)
{
    QList<QByteArray> keys;
    for (int row = 0; row < model.rowCount(); ++row) {
        if (!waitForRow(model, row)) {
            qWarning("row %d of %d did not come back", row, model.rowCount());
            break;
        }
        keys.append(model.event(row).sendKey);
    }
    return keys;
}

// A page a view (or a model tester) showed stays a moment, whatever the limit: wait until
// none is on screen any more, and let go of what is over the limit.
void letGoOfShownPages(EventsModel &model)
{
    QTest::qWait(int(EventsModel::ShownKeepMs) + 100);
    model.setResidentPageLimit(model.residentPageLimit());
}

// What a model that never let a row go shows for this filter now.
QList<QByteArray> referenceKeys(StoreSession &session, const EventFilter &filter = {})
{
    EventsModel model;
    model.setResidentPageLimit(1000);
    model.setSession(&session);
    model.setFilter(filter);
    if (!scrollToEnd(model))
        return {};
    QList<QByteArray> keys;
    for (int row = 0; row < model.rowCount(); ++row)
        keys.append(model.event(row).sendKey);
    return keys;
}

} // namespace

class TestUiEventsPaging : public QObject
{
    Q_OBJECT

private slots:
    void init();
    void cleanup();

    void residentRowsStayUnderTheLimitWhileScrolling();
    void anEvictedRowIsLoadingAndAskedForOnce();
    void scrollingBackShowsWhatAModelKeepingEveryRowShows();
    void anEvictedPageComesBackAsTheStoreNowHasIt();
    void anEvictedPageFollowsItsFilter();
    void aRefreshAtTheTopAfterEvictionBringsNewEvents();
    void aRefreshAcrossAnEvictedPageOnlyUpdates();
    void manyNewEventsAtTheTopStartTheListOver();
    void aPageOnItsWayWhenTheListStartsOverIsDropped();
    void aFirstPageGrownByRefreshesIsReadAgainInPieces();
    void aViewScrolledFarAndBackShowsItsRows();
    void aRowSelectedWhileItsPageLoadsOpensItsStory();
    void theListKeepsTheStoresOrderWhateverTheHeaderSays();

private:
    std::unique_ptr<Store> openStore();
    bool insertEvents(int from, int count);

    QTemporaryDir m_dir;
    QString m_url;
};

std::unique_ptr<Store> TestUiEventsPaging::openStore()
{
    QString error;
    auto store = Store::open(m_url, &error);
    if (!store)
        qWarning("%s", qPrintable(error));
    return store;
}

// Events n = from..from+count-1, written in that order (rowid, the list position, grows).
bool TestUiEventsPaging::insertEvents(int from, int count)
{
    auto store = openStore();
    return store && TestStores::exec(store->database().connection(), QStringLiteral(R"sql(
WITH RECURSIVE seq(n) AS (SELECT ? UNION ALL SELECT n + 1 FROM seq WHERE n < ?)
INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, payload, state,
                    sends, duplicates, created_at, updated_at)
SELECT printf('u-%05d:r-%02d', n / 10, n % 10), printf('evt-%06d', n), printf('u-%05d', n / 10),
       printf('r-%02d', n % 10), 1796115600000, printf('+1555%07d', n / 10), 'sms', '{}',
       CASE WHEN n % 4 = 0 THEN 'dead' ELSE 'applied' END, 1, 0, 1767225600000 + n * 10, 1767225600000 + n * 10
FROM seq
)sql"),
                         {from, from + count - 1});
}

void TestUiEventsPaging::init()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    // A fresh store for each test: some change it.
    m_url = QStringLiteral("sqlite:") + m_dir.filePath(QString::fromLatin1(QTest::currentTestFunction()) + QStringLiteral(".sqlite"));
    QVERIFY(openStore());
    QVERIFY(insertEvents(0, Events));
}

void TestUiEventsPaging::cleanup()
{
    QFile::remove(m_url.mid(int(qstrlen("sqlite:"))));
}

void TestUiEventsPaging::residentRowsStayUnderTheLimitWhileScrolling()
{
    StoreSession session(m_url);
    EventsModel model;
    model.setResidentPageLimit(3);
    QCOMPARE(model.residentPageLimit(), 3);
    int most = 0;
    connect(&model, &EventsModel::pageLoaded, this, [&] { most = std::max(most, model.residentRows()); });
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    QCOMPARE(model.rowCount(), Events); // the count still grows with every page
    QVERIFY2(most <= 3 * PageSize, qPrintable(QStringLiteral("%1 rows resident").arg(most)));
    QCOMPARE(model.residentRows(), 3 * PageSize);
    // The last pages read stay; the first went.
    QVERIFY(model.isResident(Events - 1));
    QVERIFY(!model.isResident(0));
    QCOMPARE(model.event(0).sendKey, QByteArray());
    QCOMPARE(model.rowOfKey("u-00399:r-09"), -1); // the newest event, on the first page
    QCOMPARE(model.rowOfKey("u-00000:r-00"), Events - 1);
    // A smaller limit lets more go at once.
    model.setResidentPageLimit(1);
    QCOMPARE(model.residentRows(), PageSize);
}

void TestUiEventsPaging::anEvictedRowIsLoadingAndAskedForOnce()
{
    StoreSession session(m_url);
    EventsModel model;
    model.setResidentPageLimit(1);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    QVERIFY(!model.isResident(0));
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    // A view painting the row asks for every column, again and again: one request.
    for (int i = 0; i < 5; ++i) {
        for (int column = 0; column < EventsModel::Count; ++column)
            model.index(1, column).data();
    }
    QCOMPARE(model.index(1, EventsModel::State).data().toString(), QStringLiteral("loading…"));
    QVERIFY(!model.index(1, EventsModel::User).data().isValid());
    QVERIFY(!model.index(1, EventsModel::User).data(EventsModel::RawRole).isValid());
    QTRY_VERIFY(model.isResident(1));
    QCOMPARE(model.index(1, EventsModel::User).data().toString(), QStringLiteral("u-00399"));
    QCOMPARE(model.event(0).sendKey, QByteArray("u-00399:r-09"));
    QVERIFY(changed.count() >= 1);
    QCOMPARE(changed.constFirst().at(0).toModelIndex().row(), 0);
    QCOMPARE(changed.constFirst().at(1).toModelIndex().row(), PageSize - 1);
    QTest::qWait(100);
    QCOMPARE(answers.count(), 1);
    // It came back while on screen: the page read last, which was not, went instead.
    QCOMPARE(model.residentRows(), PageSize);
    QVERIFY(!model.isResident(Events - 1));
}

void TestUiEventsPaging::scrollingBackShowsWhatAModelKeepingEveryRowShows()
{
    StoreSession session(m_url);
    const QList<QByteArray> reference = referenceKeys(session);
    QCOMPARE(reference.size(), Events);
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setResidentPageLimit(2);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    letGoOfShownPages(model);
    QVERIFY(model.residentRows() <= 2 * PageSize);
    QVERIFY(!model.isResident(PageSize) && !model.isResident(10 * PageSize));
    QCOMPARE(keysOf(model), reference);
    // And down again, from the top, once the pages just read are no longer on any screen.
    model.setResidentPageLimit(1);
    letGoOfShownPages(model);
    QVERIFY(model.residentRows() <= PageSize);
    QVERIFY(!model.isResident(10 * PageSize));
    QCOMPARE(keysOf(model), reference);
}

// Retention purged rows of pages that were let go, and others changed state: each page
// comes back as the store now has it, and the rows below it stay whole.
void TestUiEventsPaging::anEvictedPageComesBackAsTheStoreNowHasIt()
{
    StoreSession session(m_url);
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setResidentPageLimit(2);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    QCOMPARE(model.rowCount(), Events);
    letGoOfShownPages(model);
    QVERIFY(!model.isResident(PageSize) && !model.isResident(3 * PageSize) && !model.isResident(6 * PageSize));
    // Events are numbered from the bottom: the list's row r holds event Events - 1 - r.
    auto store = openStore();
    QVERIFY(store);
    // Part of page 1, all of page 3, and a stretch across the boundary of pages 5 and 6.
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("DELETE FROM ledger WHERE event_id BETWEEN ? AND ?"),
                 {QStringLiteral("evt-%1").arg(Events - 1 - 260, 6, 10, QLatin1Char('0')),
                  QStringLiteral("evt-%1").arg(Events - 1 - 210, 6, 10, QLatin1Char('0'))}));
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("DELETE FROM ledger WHERE event_id BETWEEN ? AND ?"),
                 {QStringLiteral("evt-%1").arg(Events - 1 - (4 * PageSize - 1), 6, 10, QLatin1Char('0')),
                  QStringLiteral("evt-%1").arg(Events - 1 - 3 * PageSize, 6, 10, QLatin1Char('0'))}));
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("DELETE FROM ledger WHERE event_id BETWEEN ? AND ?"),
                 {QStringLiteral("evt-%1").arg(Events - 1 - (6 * PageSize + 9), 6, 10, QLatin1Char('0')),
                  QStringLiteral("evt-%1").arg(Events - 1 - (6 * PageSize - 10), 6, 10, QLatin1Char('0'))}));
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("UPDATE ledger SET state = 'retrying' WHERE event_id = ?"),
                 {QStringLiteral("evt-%1").arg(Events - 1 - 450, 6, 10, QLatin1Char('0'))}));
    const int purged = 51 + PageSize + 20;
    const QList<QByteArray> now = referenceKeys(session);
    QCOMPARE(now.size(), Events - purged);

    const QList<QByteArray> keys = keysOf(model);
    QCOMPARE(keys.size(), now.size());
    QCOMPARE(QSet<QByteArray>(keys.cbegin(), keys.cend()).size(), keys.size()); // no row twice
    QCOMPARE(keys, now);
    QCOMPARE(model.rowCount(), Events - purged);
    const int retrying = int(keys.indexOf("u-00354:r-09")); // event Events - 1 - 450
    QVERIFY(retrying >= 0);
    QVERIFY(waitForRow(model, retrying));
    QCOMPARE(model.event(retrying).state, QStringLiteral("retrying"));
}

// Under a state filter, rows of an evicted page that left it go, and rows that joined its
// stretch of the list come, more of them than one reload asks for included.
void TestUiEventsPaging::anEvictedPageFollowsItsFilter()
{
    StoreSession session(m_url);
    EventFilter dead;
    dead.state = QStringLiteral("dead");
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setResidentPageLimit(1);
    model.setSession(&session);
    model.setFilter(dead);
    QVERIFY(scrollToEnd(model));
    QCOMPARE(model.rowCount(), Events / 4);
    letGoOfShownPages(model);
    QVERIFY(!model.isResident(PageSize) && !model.isResident(2 * PageSize));

    auto store = openStore();
    QVERIFY(store);
    // Page 1's stretch of the list (rowid is the list position): below page 0's last row,
    // down to its own last row.
    QSqlQuery query(store->database().connection());
    QVERIFY(query.exec(QStringLiteral("SELECT rowid FROM ledger WHERE state = 'dead' ORDER BY rowid DESC LIMIT 1 OFFSET %1")
                           .arg(PageSize - 1))
            && query.next());
    const qint64 top = query.value(0).toLongLong();
    QVERIFY(query.exec(QStringLiteral("SELECT rowid FROM ledger WHERE state = 'dead' ORDER BY rowid DESC LIMIT 1 OFFSET %1")
                           .arg(2 * PageSize - 1))
            && query.next());
    const qint64 floor = query.value(0).toLongLong();
    query.finish();
    // Ten dead rows of page 1 are redriven and applied; five hundred applied rows of its
    // stretch die (more than the page and a page more that one reload reads).
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("UPDATE ledger SET state = 'applied' WHERE rowid IN (SELECT rowid FROM ledger "
                                        "WHERE rowid < ? AND rowid > ? AND state = 'dead' ORDER BY rowid DESC LIMIT 10)"),
                 {top, floor}));
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("UPDATE ledger SET state = 'dead' WHERE rowid IN (SELECT rowid FROM ledger "
                                        "WHERE rowid < ? AND rowid > ? AND state = 'applied' ORDER BY rowid LIMIT 500)"),
                 {top, floor}));
    const QList<QByteArray> now = referenceKeys(session, dead);
    QCOMPARE(now.size(), Events / 4 - 10 + 500);
    QCOMPARE(keysOf(model), now);
    QCOMPARE(model.rowCount(), now.size());
}

void TestUiEventsPaging::aRefreshAtTheTopAfterEvictionBringsNewEvents()
{
    StoreSession session(m_url);
    EventsModel model; // no model tester: it would keep the first row in view
    model.setResidentPageLimit(2);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    QVERIFY(!model.isResident(0));
    QVERIFY(insertEvents(Events, 5));
    // The refresh timer, with the view back at the top.
    model.refreshRows(0, 40);
    QTRY_VERIFY(model.isResident(0));
    QCOMPARE(model.rowCount(), Events + 5);
    QCOMPARE(model.event(0).eventId, QStringLiteral("evt-%1").arg(Events + 4, 6, 10, QLatin1Char('0')));
    // Then the usual refresh of a resident top.
    QVERIFY(insertEvents(Events + 5, 3));
    QVERIFY(QTest::qWaitFor([&] {
        model.refreshRows(0, 40);
        return model.rowCount() == Events + 8;
    }));
    QCOMPARE(model.event(0).eventId, QStringLiteral("evt-%1").arg(Events + 7, 6, 10, QLatin1Char('0')));
    QCOMPARE(keysOf(model), referenceKeys(session));
}

// The rows on screen span three pages, the middle one let go (a view sorted by a column
// shows rows from anywhere): the refresh's answer holds that page's rows, which the model
// does not have, between rows it has. They are not new rows: only the resident ones change.
void TestUiEventsPaging::aRefreshAcrossAnEvictedPageOnlyUpdates()
{
    StoreSession session(m_url);
    const QList<QByteArray> reference = referenceKeys(session);
    EventsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setResidentPageLimit(1);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    letGoOfShownPages(model);
    QVERIFY(waitForRow(model, 150));
    QVERIFY(waitForRow(model, 2 * PageSize + 49));
    QVERIFY(!model.isResident(PageSize));
    auto store = openStore();
    QVERIFY(store);
    // Row 160 on the first page is retried meanwhile.
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("UPDATE ledger SET state = 'retrying' WHERE send_key = ?"),
                 {QString::fromLatin1(reference.at(160))}));
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy removed(&model, &QAbstractItemModel::rowsRemoved);
    model.refreshRows(150, 2 * PageSize + 49);
    QTRY_COMPARE(model.event(160).state, QStringLiteral("retrying"));
    QCOMPARE(inserted.count(), 0);
    QCOMPARE(removed.count(), 0);
    QCOMPARE(model.rowCount(), Events);
    QVERIFY(!model.isResident(PageSize));
    QCOMPARE(keysOf(model), reference);
}

// More new events than the evicted first page and a page more: the list starts over from
// the top, as a refresh that finds nothing it knows does, and scrolls on from there.
void TestUiEventsPaging::manyNewEventsAtTheTopStartTheListOver()
{
    StoreSession session(m_url);
    EventsModel model;
    model.setResidentPageLimit(2);
    model.setSession(&session);
    QVERIFY(scrollToEnd(model));
    QVERIFY(!model.isResident(0));
    QVERIFY(insertEvents(Events, 3 * PageSize));
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    model.index(0, 0).data();
    QTRY_COMPARE(reset.count(), 1);
    QVERIFY(model.isResident(0));
    QCOMPARE(model.event(0).eventId, QStringLiteral("evt-%1").arg(Events + 3 * PageSize - 1, 6, 10, QLatin1Char('0')));
    QVERIFY(model.canFetchMore({}));
    QVERIFY(scrollToEnd(model));
    QCOMPARE(model.rowCount(), Events + 3 * PageSize);
    QCOMPARE(keysOf(model), referenceKeys(session));
}

// The view asked for the next page just as the first page came back overtaken: that page
// continued the old list, from far below the new one's end, and would leave a gap.
void TestUiEventsPaging::aPageOnItsWayWhenTheListStartsOverIsDropped()
{
    StoreSession session(m_url);
    EventsModel model;
    model.setResidentPageLimit(2);
    model.setSession(&session);
    model.ensureLoaded();
    QVERIFY(QTest::qWaitFor([&] {
        if (!model.isLoading())
            model.fetchMore({});
        return model.rowCount() >= 10 * PageSize;
    }));
    QTRY_VERIFY(!model.isLoading());
    QVERIFY(!model.isResident(0));
    QVERIFY(insertEvents(Events, 3 * PageSize));
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy asked(&session, &StoreSession::eventsLoaded);
    model.index(0, 0).data();
    QCoreApplication::processEvents(); // the first page is asked for again: answered first
    model.fetchMore({});
    QTRY_COMPARE(asked.count(), 2);
    QCOMPARE(reset.count(), 1);
    QCOMPARE(model.rowCount(), 2 * PageSize); // what the first page's reload read, no more
    QVERIFY(scrollToEnd(model));
    QCOMPARE(keysOf(model), referenceKeys(session));
}

// An operator watching the top for a while: every refresh adds the new events to the first
// page. Let go, it must not come back as one query for everything that came meanwhile.
void TestUiEventsPaging::aFirstPageGrownByRefreshesIsReadAgainInPieces()
{
    StoreSession session(m_url);
    EventsModel model; // no model tester: it would fetch every page at once
    model.setResidentPageLimit(2);
    model.setSession(&session);
    model.ensureLoaded();
    QTRY_COMPARE(model.rowCount(), PageSize);
    for (int round = 0; round < 3; ++round) {
        QVERIFY(insertEvents(Events + round * 150, 150));
        QVERIFY(QTest::qWaitFor([&] {
            model.refreshRows(0, 2 * PageSize - 1);
            return model.rowCount() == PageSize + (round + 1) * 150;
        }));
    }
    QCOMPARE(model.event(0).eventId, QStringLiteral("evt-%1").arg(Events + 449, 6, 10, QLatin1Char('0')));
    QVERIFY(scrollToEnd(model));
    letGoOfShownPages(model);
    QVERIFY(!model.isResident(0));
    QSignalSpy answers(&session, &StoreSession::eventsLoaded);
    QVERIFY(waitForRow(model, 0));
    QTRY_VERIFY(!answers.isEmpty());
    const auto rows = answers.constFirst().at(1).value<QList<EventRow>>();
    // The first page's rows and a page more, not the 650 rows it had grown to.
    QVERIFY2(rows.size() <= 3 * PageSize, qPrintable(QString::number(rows.size())));
    QCOMPARE(keysOf(model), referenceKeys(session));
}

// A real view: scrolled to the bottom, then back to the top, it shows the top rows again.
void TestUiEventsPaging::aViewScrolledFarAndBackShowsItsRows()
{
    StoreSession session(m_url);
    const QList<QByteArray> reference = referenceKeys(session);
    EventsModel model;
    model.setResidentPageLimit(2);
    model.setSession(&session);
    QTableView view;
    view.setModel(&model);
    view.resize(1280, 800);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    model.ensureLoaded();
    QTRY_VERIFY(model.hasLoaded());
    QVERIFY(QTest::qWaitFor(
        [&] {
            view.scrollToBottom();
            return !model.canFetchMore({}) && !model.isLoading();
        },
        60000));
    QCOMPARE(model.rowCount(), Events);
    letGoOfShownPages(model);
    QVERIFY(!model.isResident(0));
    view.scrollToTop();
    QTRY_VERIFY(model.isResident(0));
    const int shown = view.rowAt(view.viewport()->height() - 1);
    QVERIFY(shown > 10);
    QTRY_COMPARE(model.index(shown, EventsModel::SendKey).data().toString(), QString::fromLatin1(reference.at(shown)));
    QCOMPARE(model.index(0, EventsModel::SendKey).data().toString(), QString::fromLatin1(reference.at(0)));
    // What the view shows, and the pages it showed a moment ago, and no more.
    QVERIFY2(model.residentRows() <= 4 * PageSize, qPrintable(QString::number(model.residentRows())));
}

// The operator clicks a row still showing "loading…": its story opens once the row is there.
void TestUiEventsPaging::aRowSelectedWhileItsPageLoadsOpensItsStory()
{
    StoreSession session(m_url);
    const QList<QByteArray> reference = referenceKeys(session);
    QCoreApplication::setOrganizationName(QStringLiteral("once-tests"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_uieventspaging"));
    Settings().setHeaderState(QStringLiteral("events"), {});
    EventsPage page;
    page.resize(1280, 800);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    EventsModel &model = *page.eventsModel();
    model.setResidentPageLimit(1);
    page.setSession(&session);
    QVERIFY(scrollToEnd(model));
    letGoOfShownPages(model);
    // The view's row is the model's; the view scrolls to it.
    const int row = 5 * PageSize + 3;
    QVERIFY(!model.isResident(row));
    page.eventsView()->selectRow(row);
    QVERIFY(page.storyKey().isEmpty());
    QTRY_COMPARE(page.storyKey(), reference.at(row));
    QTRY_VERIFY(page.storyLoaded());
}

// The list is the store's order, newest written first, and no other. A click on a header,
// or a sort kept in the header state an older console saved, used to sort the few pages
// the model holds, showing one page's rows as if they were the whole ledger's first.
void TestUiEventsPaging::theListKeepsTheStoresOrderWhateverTheHeaderSays()
{
    {
        // Two old events with more partner calls than the rest, far below the first page.
        auto store = openStore();
        QVERIFY(store);
        QVERIFY(TestStores::exec(store->database().connection(),
                                 QStringLiteral("UPDATE ledger SET sends = 3 WHERE send_key IN (?, ?)"),
                                 {QStringLiteral("u-00010:r-01"), QStringLiteral("u-00020:r-02")}));
    }
    StoreSession session(m_url);
    const QList<QByteArray> reference = referenceKeys(session);
    QCoreApplication::setOrganizationName(QStringLiteral("once-tests"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_uieventspaging"));
    {
        QStandardItemModel columns(0, EventsModel::Count);
        QHeaderView older(Qt::Horizontal);
        older.setModel(&columns);
        older.setSortIndicatorShown(true);
        older.setSortIndicator(EventsModel::User, Qt::AscendingOrder);
        Settings().setHeaderState(QStringLiteral("events.sendsFirst"), older.saveState());
    }
    EventsPage page;
    page.resize(1280, 800);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    page.setSession(&session);
    const EventsModel &model = *page.eventsModel();
    QTRY_VERIFY(model.hasLoaded() && !model.isLoading() && model.rowCount() >= PageSize);
    QTableView *view = page.eventsView();
    const auto shownKeys = [view] {
        QList<QByteArray> keys;
        for (int row = 0; row < 30; ++row)
            keys.append(view->model()->index(row, EventsModel::SendKey).data().toString().toLatin1());
        return keys;
    };
    QCOMPARE(shownKeys(), reference.mid(0, 30));
    QHeaderView *header = view->horizontalHeader();
    QVERIFY(!header->isSortIndicatorShown());
    const auto click = [header](int column) {
        QTest::mouseClick(header->viewport(), Qt::LeftButton, {},
                          QPoint(header->sectionViewportPosition(column) + 5, header->height() / 2));
    };
    // Any other column keeps the store's order.
    click(EventsModel::User);
    QCOMPARE(shownKeys(), reference.mid(0, 30));
    // Sends is the one other order, and the store's too: the most partner calls first, over
    // the whole ledger, not one page's rows sorted.
    click(EventsModel::Sends);
    const auto shownSends = [view] {
        QList<int> sends;
        for (int row = 0; row < 30; ++row)
            sends.append(view->model()->index(row, EventsModel::Sends).data(EventsModel::RawRole).toInt());
        return sends;
    };
    const QSet<QByteArray> mostSent{"u-00010:r-01", "u-00020:r-02"};
    const auto mostSentFirst = [&] {
        const QList<QByteArray> keys = shownKeys();
        return model.hasLoaded() && !model.isLoading() && QSet<QByteArray>{keys.value(0), keys.value(1)} == mostSent;
    };
    QTRY_VERIFY(mostSentFirst());
    const QList<int> sends = shownSends();
    QCOMPARE(sends.mid(0, 3), (QList<int>{3, 3, 1}));
    // And back.
    click(EventsModel::User);
    QTRY_COMPARE(shownKeys(), reference.mid(0, 30));
    QVERIFY(!header->isSortIndicatorShown());
    Settings().setHeaderState(QStringLiteral("events.sendsFirst"), {});
}

QTEST_MAIN(TestUiEventsPaging)
#include "tst_uieventspaging.moc"
