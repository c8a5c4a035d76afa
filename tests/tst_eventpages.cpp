// The Events page's row cache: rows kept as keyset pages, of which only some hold their
// rows. Pure: no store, no model signals.
#include "models/eventpages.h"

#include <QTest>

using namespace once;
using namespace once::ui;

namespace {

// Rows at positions from down to from - count + 1 (newest first), keyed "k<position>".
QList<EventRow> rowsAt(qint64 from, int count)
{
    QList<EventRow> rows;
    for (qint64 position = from; position > from - count; --position) {
        EventRow row;
        row.sendKey = "k" + QByteArray::number(position);
        row.listPosition = position;
        rows.append(row);
    }
    return rows;
}

// Three pages of ten: positions 1000..991, 990..981, 980..971.
EventPages threePages()
{
    EventPages pages;
    pages.append(0, rowsAt(1000, 10));
    pages.append(991, rowsAt(990, 10));
    pages.append(981, rowsAt(980, 10));
    return pages;
}

QByteArray keyAt(const EventPages &pages, int row)
{
    const EventRow *held = pages.row(row);
    return held ? held->sendKey : QByteArray();
}

} // namespace

class TestEventPages : public QObject
{
    Q_OBJECT

private slots:
    void rowsAreFoundAcrossPages();
    void anEvictedPageStandsForItsRowsByCount();
    void aPageLoadedAgainMayHoldMoreOrFewerRows();
    void insertAndRemoveMoveTheRowsBelow();
    void emptyPagesHoldNoRow();
    void positionsFindTheirPage_data();
    void positionsFindTheirPage();
    void leastRecentlyUsedSparesWhatWasShown();
    void aSplitPageStandsForTheSameRows();
};

void TestEventPages::rowsAreFoundAcrossPages()
{
    const EventPages pages = threePages();
    QCOMPARE(pages.rowCount(), 30);
    QCOMPARE(pages.residentRows(), 30);
    QCOMPARE(pages.pageOfRow(-1), -1);
    QCOMPARE(pages.pageOfRow(0), 0);
    QCOMPARE(pages.pageOfRow(9), 0);
    QCOMPARE(pages.pageOfRow(10), 1);
    QCOMPARE(pages.pageOfRow(29), 2);
    QCOMPARE(pages.pageOfRow(30), -1);
    QCOMPARE(keyAt(pages, 0), QByteArray("k1000"));
    QCOMPARE(keyAt(pages, 15), QByteArray("k985"));
    QCOMPARE(pages.rowOfKey("k971"), 29);
    QCOMPARE(pages.rowOfKey("k970"), -1);
    QCOMPARE(pages.floorOf(0), qint64(991));
    QCOMPARE(pages.floorOf(2), qint64(-1));
}

void TestEventPages::anEvictedPageStandsForItsRowsByCount()
{
    EventPages pages = threePages();
    pages.evict(1);
    QCOMPARE(pages.rowCount(), 30);
    QCOMPARE(pages.residentRows(), 20);
    QCOMPARE(pages.residentPages().size(), 2);
    QVERIFY(!pages.page(1).resident);
    QVERIFY(pages.page(1).rows.isEmpty());
    QCOMPARE(pages.page(1).count, 10);
    QCOMPARE(pages.page(1).above, qint64(991)); // kept, to load it again by
    QCOMPARE(pages.row(15), nullptr);
    QCOMPARE(pages.rowOfKey("k985"), -1); // the index holds resident rows only
    QCOMPARE(keyAt(pages, 20), QByteArray("k980"));
    QCOMPARE(pages.rowOfKey("k980"), 20);
    pages.evict(1); // twice is once
    QCOMPARE(pages.residentRows(), 20);
}

void TestEventPages::aPageLoadedAgainMayHoldMoreOrFewerRows()
{
    EventPages pages = threePages();
    pages.evict(1);
    // Three rows purged meanwhile: the rows below move up, and stay whole.
    QList<EventRow> fewer = rowsAt(990, 10);
    fewer.remove(2, 3);
    pages.setRows(1, fewer);
    QCOMPARE(pages.rowCount(), 27);
    QCOMPARE(pages.residentRows(), 27);
    QCOMPARE(pages.firstRow(2), 17);
    QCOMPARE(keyAt(pages, 12), QByteArray("k985"));
    QCOMPARE(keyAt(pages, 17), QByteArray("k980"));
    QCOMPARE(pages.rowOfKey("k980"), 17);
    QCOMPARE(pages.rowOfKey("k971"), 26);
    // Rows that joined: the page grows.
    pages.evict(1);
    pages.setRows(1, rowsAt(990, 10) + rowsAt(985, 1));
    QCOMPARE(pages.rowCount(), 31);
    QCOMPARE(pages.rowOfKey("k980"), 21);
}

void TestEventPages::insertAndRemoveMoveTheRowsBelow()
{
    EventPages pages = threePages();
    EventRow newest;
    newest.sendKey = "k2000";
    newest.listPosition = 2000;
    pages.insert(0, 0, newest);
    QCOMPARE(pages.rowCount(), 31);
    QCOMPARE(pages.rowOfKey("k2000"), 0);
    QCOMPARE(pages.rowOfKey("k1000"), 1);
    QCOMPARE(pages.rowOfKey("k971"), 30);
    // Across a page boundary: the last three of the first page, the first two of the second.
    pages.remove(8, 5);
    QCOMPARE(pages.rowCount(), 26);
    QCOMPARE(pages.page(0).count, 8);
    QCOMPARE(pages.page(1).count, 8);
    QCOMPARE(keyAt(pages, 7), QByteArray("k994"));
    QCOMPARE(keyAt(pages, 8), QByteArray("k988"));
    QCOMPARE(pages.rowOfKey("k990"), -1);
    QCOMPARE(pages.rowOfKey("k971"), 25);
    // From an evicted page only its count goes.
    pages.evict(2);
    pages.remove(20, 6);
    QCOMPARE(pages.rowCount(), 20);
    QCOMPARE(pages.page(2).count, 4);
    QCOMPARE(pages.residentRows(), 16);
}

void TestEventPages::emptyPagesHoldNoRow()
{
    EventPages pages;
    pages.append(0, rowsAt(1000, 10));
    pages.append(991, {}); // every row of that answer was already shown
    pages.append(900, rowsAt(899, 10));
    QCOMPARE(pages.rowCount(), 20);
    QCOMPARE(pages.pageOfRow(9), 0);
    QCOMPARE(pages.pageOfRow(10), 2);
    QCOMPARE(keyAt(pages, 10), QByteArray("k899"));
    pages.remove(0, 10);
    QCOMPARE(pages.pageOfRow(0), 2);
}

void TestEventPages::positionsFindTheirPage_data()
{
    QTest::addColumn<qint64>("position");
    QTest::addColumn<int>("page");
    QTest::newRow("newer than the top") << qint64(5000) << 0;
    QTest::newRow("the first page's last row") << qint64(991) << 0;
    QTest::newRow("just below it") << qint64(990) << 1;
    QTest::newRow("the last page's top") << qint64(980) << 2;
    QTest::newRow("below every row") << qint64(3) << 2;
}

void TestEventPages::positionsFindTheirPage()
{
    QFETCH(qint64, position);
    QFETCH(int, page);
    QCOMPARE(threePages().pageOfPosition(position), page);
}

void TestEventPages::leastRecentlyUsedSparesWhatWasShown()
{
    EventPages pages = threePages();
    // Loaded in order 0, 1, 2: the first is the oldest.
    QCOMPARE(pages.leastRecentlyUsed(-1, 100), 0);
    QCOMPARE(pages.leastRecentlyUsed(0, 100), 1);
    pages.touch(0, 50);
    QCOMPARE(pages.leastRecentlyUsed(-1, 100), 1);
    // Shown at or after the moment asked about: spared, whatever its age.
    pages.touch(1, 120);
    QCOMPARE(pages.leastRecentlyUsed(-1, 100), 2);
    QCOMPARE(pages.leastRecentlyUsed(2, 100), 0);
    pages.touch(0, 130);
    QCOMPARE(pages.leastRecentlyUsed(2, 100), -1);
    pages.evict(2);
    QCOMPARE(pages.leastRecentlyUsed(-1, 200), 1); // shown at 120, before the first at 130
}

void TestEventPages::aSplitPageStandsForTheSameRows()
{
    EventPages pages = threePages();
    pages.evict(2);
    pages.split(0, 4);
    QCOMPARE(pages.pageCount(), 4);
    QCOMPARE(pages.rowCount(), 30);
    QCOMPARE(pages.residentRows(), 20);
    QCOMPARE(pages.page(0).count, 4);
    QCOMPARE(pages.page(1).count, 6);
    // Its stretch of the order: below the first part's last row, down to the next page.
    QCOMPARE(pages.page(1).above, qint64(997));
    QCOMPARE(pages.floorOf(0), qint64(997));
    QCOMPARE(pages.floorOf(1), qint64(991));
    QCOMPARE(pages.pageOfPosition(997), 0);
    QCOMPARE(pages.pageOfPosition(996), 1);
    QCOMPARE(pages.pageOfRow(3), 0);
    QCOMPARE(pages.pageOfRow(4), 1);
    QCOMPARE(keyAt(pages, 4), QByteArray("k996"));
    QCOMPARE(pages.rowOfKey("k996"), 4);
    QCOMPARE(pages.rowOfKey("k981"), 19);
    // The pages below moved one down, the evicted one too.
    QVERIFY(pages.page(2).resident);
    QVERIFY(!pages.page(3).resident);
    QCOMPARE(pages.page(3).above, qint64(981));
    pages.evict(1);
    QCOMPARE(pages.residentRows(), 14);
    QCOMPARE(pages.row(5), nullptr);
    QCOMPARE(keyAt(pages, 10), QByteArray("k990"));
}

QTEST_MAIN(TestEventPages)
#include "tst_eventpages.moc"
