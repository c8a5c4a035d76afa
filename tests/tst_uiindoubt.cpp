// The In doubt page over more events than one read brings: the reader sends them a page
// at a time, the page shows the first as soon as it comes, and a reload keeps what is
// shown (and the operator's selection) until it has every row.
#include "httptesting.h"
#include "models/indoubtmodel.h"
#include "operator/storereader.h"
#include "pages/indoubtpage.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "teststores.h"

#include <QAbstractProxyModel>
#include <QAction>
#include <QApplication>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLoggingCategory>
#include <QSet>
#include <QSignalSpy>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace once::ui;

namespace {

constexpr int PageRows = StoreReader::InDoubtPageRows;
// Two whole pages and part of a third, among as many events that were delivered.
constexpr int InDoubt = 2 * PageRows + PageRows / 2;

QSet<QByteArray> keysOf(const InDoubtModel &model)
{
    QSet<QByteArray> keys;
    for (int row = 0; row < model.rowCount(); ++row)
        keys.insert(model.event(row).sendKey);
    return keys;
}

QByteArray keyOf(int n)
{
    return QStringLiteral("u-%1:r-%2").arg(n / 10, 5, 10, QLatin1Char('0')).arg(n % 10, 2, 10, QLatin1Char('0')).toUtf8();
}

// The page on a session of the test's store, and its model.
struct Screen
{
    explicit Screen(const QString &url) : session(url)
    {
        page.setSession(&session);
        model = page.findChild<InDoubtModel *>();
    }
    StoreSession session;
    InDoubtPage page;
    InDoubtModel *model = nullptr;
};

} // namespace

class TestUiInDoubt : public QObject
{
    Q_OBJECT

private slots:
    void init();
    void cleanup();

    void theFirstPageShowsBeforeTheRestIsRead();
    void aReloadKeepsTheRowsAndSelectionUntilItHasThemAll();
    void checkAtPartnerAsksTheLookupAndSettlesWhatItFinds();

private:
    std::unique_ptr<Store> openStore();
    bool waitForLoad(QSignalSpy &pages);

    QTemporaryDir m_dir;
    QString m_url;
};

std::unique_ptr<Store> TestUiInDoubt::openStore()
{
    QString error;
    auto store = Store::open(m_url, &error);
    if (!store)
        qWarning("%s", qPrintable(error));
    return store;
}

// Waits for the page of a load that says it is the last.
bool TestUiInDoubt::waitForLoad(QSignalSpy &pages)
{
    return QTest::qWaitFor([&] { return !pages.isEmpty() && pages.last().at(2).toBool(); }, 30000);
}

void TestUiInDoubt::init()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    m_url = QStringLiteral("sqlite:") + m_dir.filePath(QString::fromLatin1(QTest::currentTestFunction()) + QStringLiteral(".sqlite"));
    auto store = openStore();
    QVERIFY(store);
    // Events n = 0..2*InDoubt-1; the odd ones in doubt.
    QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral(R"sql(
WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq WHERE n < ?)
INSERT INTO ledger (send_key, event_id, user_id, reminder_id, scheduled_at, destination, channel, payload, state,
                    sends, duplicates, created_at, updated_at, owner_worker, claimed_at)
SELECT printf('u-%05d:r-%02d', n / 10, n % 10), printf('evt-%06d', n), printf('u-%05d', n / 10),
       printf('r-%02d', n % 10), 1796115600000, printf('+1555%07d', n / 10), 'sms', '{}',
       CASE WHEN n % 2 = 1 THEN 'in_doubt' ELSE 'applied' END, 1, 0, 1767225600000 + n * 10, 1767225600000 + n * 10,
       'worker-1', 1767225600000 + n * 10
FROM seq
)sql"),
                 {2 * InDoubt - 1}));
}

void TestUiInDoubt::cleanup()
{
    QFile::remove(m_url.mid(int(qstrlen("sqlite:"))));
}

void TestUiInDoubt::theFirstPageShowsBeforeTheRestIsRead()
{
    Screen screen(m_url);
    StoreSession &session = screen.session;
    InDoubtPage &page = screen.page;
    InDoubtModel *model = screen.model;
    auto *count = page.findChild<QLabel *>(QStringLiteral("count"));
    auto *table = page.findChild<QTableView *>(QStringLiteral("inDoubt"));
    QVERIFY(model && count && table);

    // Connected after the page: each check sees what the page made of that page of rows.
    QList<int> shownAtEachPage;
    QStringList countAtEachPage;
    QList<QByteArray> topRowAtEachPage;
    QSignalSpy pages(&session, &StoreSession::inDoubtLoaded);
    connect(&session, &StoreSession::inDoubtLoaded, this, [&] {
        shownAtEachPage << model->rowCount();
        countAtEachPage << count->text();
        topRowAtEachPage << table->model()->index(0, InDoubtModel::SendKey).data(InDoubtModel::RawRole).toByteArray();
    });
    page.refresh();
    QVERIFY(waitForLoad(pages));

    QCOMPARE(shownAtEachPage, (QList<int>{PageRows, 2 * PageRows, InDoubt}));
    // The list shows the longest waiting on top, and that is what comes first: the pages
    // that follow go below the rows the operator is reading, never above them.
    QCOMPARE(topRowAtEachPage, QList<QByteArray>(3, keyOf(1)));
    QVERIFY2(countAtEachPage.first().contains(QStringLiteral("more loading")), qPrintable(countAtEachPage.first()));
    QVERIFY2(!countAtEachPage.last().contains(QStringLiteral("loading")), qPrintable(countAtEachPage.last()));
    QVERIFY2(countAtEachPage.last().contains(QLocale().toString(InDoubt)), qPrintable(countAtEachPage.last()));

    // Each event in doubt exactly once, and nothing else.
    QSet<QByteArray> expected;
    for (int n = 1; n < 2 * InDoubt; n += 2)
        expected.insert(keyOf(n));
    QCOMPARE(keysOf(*model), expected);
}

void TestUiInDoubt::aReloadKeepsTheRowsAndSelectionUntilItHasThemAll()
{
    Screen screen(m_url);
    StoreSession &session = screen.session;
    InDoubtPage &page = screen.page;
    InDoubtModel *model = screen.model;
    auto *table = page.findChild<QTableView *>(QStringLiteral("inDoubt"));
    QVERIFY(model && table);
    QSignalSpy pages(&session, &StoreSession::inDoubtLoaded);
    page.refresh();
    QVERIFY(waitForLoad(pages));
    QCOMPARE(model->rowCount(), InDoubt);

    // The operator selects the newest event in doubt that stays so, which the reload
    // reads last.
    const QByteArray chosen = keyOf(2 * InDoubt - 201);
    int chosenRow = -1;
    for (int row = 0; row < model->rowCount(); ++row)
        if (model->event(row).sendKey == chosen)
            chosenRow = row;
    QVERIFY(chosenRow >= 0);
    const auto viewIndex = qobject_cast<QAbstractProxyModel *>(table->model())->mapFromSource(model->index(chosenRow, 0));
    table->selectionModel()->select(viewIndex, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);

    // Meanwhile another operator resolves the newest hundred.
    {
        auto store = openStore();
        QVERIFY(store);
        QVERIFY(TestStores::exec(store->database().connection(), QStringLiteral("UPDATE ledger SET state = 'applied' WHERE state = 'in_doubt' AND rowid > ?"),
                     {2 * InDoubt - 200}));
    }

    QList<int> shownAtEachPage;
    connect(&session, &StoreSession::inDoubtLoaded, this, [&] { shownAtEachPage << model->rowCount(); });
    pages.clear();
    page.refresh();
    QVERIFY(waitForLoad(pages));

    // Until the last page, the rows shown are the ones of the load before.
    QCOMPARE(shownAtEachPage.size(), 3);
    QCOMPARE(shownAtEachPage.at(0), InDoubt);
    QCOMPARE(shownAtEachPage.at(1), InDoubt);
    QCOMPARE(shownAtEachPage.at(2), InDoubt - 100);
    QVERIFY(!keysOf(*model).contains(keyOf(2 * InDoubt - 1)));

    const auto selected = table->selectionModel()->selectedRows(InDoubtModel::SendKey);
    QCOMPARE(selected.size(), 1);
    QCOMPARE(selected.first().data(InDoubtModel::RawRole).toByteArray(), chosen);
}

// "Check at partner now" asks the lookup of the partner the partners file routes the
// keys' channel to: the key the partner has is settled delivered with its message id,
// the one it does not have stays in doubt and the page says "not found at texts". Nothing
// is sent.
void TestUiInDoubt::checkAtPartnerAsksTheLookupAndSettlesWhatItFinds()
{
    PartnerFaults faults;
    faults.idempotent = false;
    PartnerSimulator partner(faults);
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    HttpClient client;
    const HttpResult posted = oncetest::exchange(client, oncetest::reminderPost(partner.port(), keyOf(1)));
    QCOMPARE(posted.httpStatus, 200);
    const qint64 requestsBefore = partner.stats().requests;
    const QString partnersFile = m_dir.filePath(QStringLiteral("partners.json"));
    QFile file(partnersFile);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(QStringLiteral(R"({"partners": {"texts": {"url": "http://127.0.0.1:%1/reminders",
        "lookup": "http://127.0.0.1:%1/reminders/{key}"}}, "routes": {"sms": "texts"}})")
                   .arg(partner.port())
                   .toUtf8());
    file.close();
    Settings().setPartnersFile(partnersFile);

    Screen screen(m_url);
    auto *table = screen.page.findChild<QTableView *>(QStringLiteral("inDoubt"));
    auto *check = screen.page.findChild<QAction *>(QStringLiteral("checkAtPartner"));
    auto *status = screen.page.findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY(table && check && status);
    QSignalSpy pages(&screen.session, &StoreSession::inDoubtLoaded);
    screen.page.refresh();
    QVERIFY(waitForLoad(pages));
    QCOMPARE(table->model()->index(0, InDoubtModel::Reconciliation).data().toString(), QStringLiteral("not asked yet"));
    // The two longest waiting: keyOf(1), which the partner has, and keyOf(3).
    table->selectionModel()->select(table->model()->index(0, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    table->selectionModel()->select(table->model()->index(1, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    QVERIFY(check->isEnabled());
    pages.clear();
    check->trigger();
    QVERIFY2(QTest::qWaitFor([&] { return status->text().contains(QLatin1String("The partner answered")); }, 30000),
             qPrintable(status->text()));
    QVERIFY2(status->text().contains(QStringLiteral("%1: found at texts as msg_").arg(QString::fromLatin1(keyOf(1))))
                 && status->text().contains(QStringLiteral("%1: not found at texts").arg(QString::fromLatin1(keyOf(3)))),
             qPrintable(status->text()));
    QVERIFY(waitForLoad(pages));
    QVERIFY(!keysOf(*screen.model).contains(keyOf(1)));
    QVERIFY(keysOf(*screen.model).contains(keyOf(3)));
    const QString said = table->model()->index(0, InDoubtModel::Reconciliation).data().toString();
    QVERIFY2(said.startsWith(QLatin1String("not found at texts at ")), qPrintable(said));
    auto store = openStore();
    QVERIFY(store);
    const auto settled = store->inspector().event(QString::fromLatin1(keyOf(1)), &error);
    QVERIFY2(settled, qPrintable(error));
    QCOMPARE(settled->state, QStringLiteral("applied"));
    QVERIFY2(settled->providerRequestId.startsWith(QLatin1String("msg_")), qPrintable(settled->providerRequestId));
    QCOMPARE(partner.stats().requests, requestsBefore);
}

int main(int argc, char **argv)
{
    QApplication app(argc, argv);
    TestUiInDoubt test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_uiindoubt.moc"
