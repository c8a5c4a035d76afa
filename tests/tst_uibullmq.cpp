// The console's BullMQ page on a real Redis (the Redis fixture; ONCE_TEST_REDIS_URL_FILE)
// holding a queue that BullMQ 6.7.0 itself filled (tests/producers/bullmq-states.js):
// the queue is found with BullMQ's counts, a state's jobs and a job's details are shown,
// a search answers, the password never shows, and an action once confirmed runs through
// BullMQ's scripts (BullMQ's own getState agrees) and is audited with what it did. Every read runs on the
// page's BullMQ thread; the test only waits for the widgets to change.
#include "pages/bullmqpage.h"
#include "session/storesession.h"

#include "operator/inspector.h"
#include "store/store.h"

#include <QApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTabBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QUrl>

using namespace once::ui;

class TestUiBullMq : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void showsQueuesJobsAndDetails();
    void withoutSupportedScriptsTheQueueIsReadOnlyAndSaysWhy();
    void aConfirmedRetryRunsThroughBullMqAndIsAudited();

private:
    int rowOf(QTableView *view, const QString &text) const;

    QString m_url;
    QString m_producers;
    QString m_queue;
};

void TestUiBullMq::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QFile file(qEnvironmentVariable("ONCE_TEST_REDIS_URL_FILE"));
    QVERIFY2(file.open(QIODevice::ReadOnly),
             "set ONCE_TEST_REDIS_URL_FILE to the url file of scripts/redis-server start DIR (ctest does)");
    m_url = QString::fromUtf8(file.readAll().trimmed());
    m_producers = qEnvironmentVariable("ONCE_TEST_PRODUCERS");
    m_queue = QStringLiteral("ui-%1").arg(QCoreApplication::applicationPid());
    QProcess node;
    node.setWorkingDirectory(m_producers);
    node.start(QStringLiteral("node"), {QStringLiteral("bullmq-states.js"), QStringLiteral("--url"), m_url,
                                        QStringLiteral("--queue"), m_queue});
    QVERIFY(node.waitForFinished(60000));
    QVERIFY2(node.exitCode() == 0, node.readAllStandardError().constData());
}

int TestUiBullMq::rowOf(QTableView *view, const QString &text) const
{
    for (int row = 0; row < view->model()->rowCount(); ++row) {
        if (view->model()->index(row, 0).data().toString() == text)
            return row;
    }
    return -1;
}

void TestUiBullMq::showsQueuesJobsAndDetails()
{
    BullMqPage page;
    page.resize(1400, 800);
    page.show();
    page.connectTo(m_url,
                   QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq/dist/cjs/commands")));
    auto *queues = page.findChild<QTableView *>(QStringLiteral("bullmqQueues"));
    QTRY_VERIFY_WITH_TIMEOUT(rowOf(queues, m_queue) >= 0, 10000);
    const int row = rowOf(queues, m_queue);
    // 3 completed, 2 failed, 1 active, 4 waiting, 5 delayed, 6 prioritized.
    const QList<QPair<int, int>> counts{{1, 4}, {2, 1}, {3, 5}, {4, 6}, {5, 3}, {6, 2}};
    for (const auto &[column, count] : counts)
        QCOMPARE(queues->model()->index(row, column).data().toInt(), count);
    // No password anywhere on the page.
    const QString password = QUrl(m_url).password();
    QVERIFY(!page.findChild<QLineEdit *>(QStringLiteral("bullmqUrl"))->text().contains(password));
    QVERIFY(!page.findChild<QLabel *>(QStringLiteral("bullmqStatus"))->text().contains(password));

    queues->setCurrentIndex(queues->model()->index(row, 0));
    auto *states = page.findChild<QTabBar *>(QStringLiteral("bullmqStates"));
    auto *jobs = page.findChild<QTableView *>(QStringLiteral("bullmqJobs"));
    for (int tab = 0; tab < states->count(); ++tab) {
        if (states->tabText(tab) == QLatin1String("failed"))
            states->setCurrentIndex(tab);
    }
    QTRY_COMPARE_WITH_TIMEOUT(jobs->model()->rowCount(), 2, 10000);
    QCOMPARE(jobs->model()->index(0, 5).data().toString(), QStringLiteral("the partner said 400"));
    QVERIFY(
        page.findChild<QPushButton *>(QStringLiteral("bullmqAction-bullmq-retry-all-failed"))->isEnabled());
    jobs->setCurrentIndex(jobs->model()->index(0, 0));
    QVERIFY(page.findChild<QPushButton *>(QStringLiteral("bullmqAction-bullmq-retry"))->isEnabled());
    auto *details = page.findChild<QPlainTextEdit *>(QStringLiteral("bullmqDetails"));
    QTRY_VERIFY_WITH_TIMEOUT(details->toPlainText().contains(QLatin1String("Stack trace")), 10000);
    QVERIFY(details->toPlainText().contains(QLatin1String("failed")));
    QVERIFY(details->toPlainText().contains(QLatin1String("Send key: u-")));

    auto *search = page.findChild<QLineEdit *>(QStringLiteral("bullmqSearch"));
    search->setText(QStringLiteral("\"u-13\""));
    QMetaObject::invokeMethod(search, "returnPressed");
    QTRY_COMPARE_WITH_TIMEOUT(jobs->model()->rowCount(), 1, 10000);
    QCOMPARE(jobs->model()->index(0, 1).data().toString(), QStringLiteral("later"));
}

void TestUiBullMq::withoutSupportedScriptsTheQueueIsReadOnlyAndSaysWhy()
{
    BullMqPage page;
    page.show();
    page.connectTo(m_url,
                   QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq-6-5/dist/cjs/commands")));
    auto *status = page.findChild<QLabel *>(QStringLiteral("bullmqStatus"));
    QTRY_VERIFY_WITH_TIMEOUT(status->text().contains(QLatin1String("Read-only")), 10000);
    QVERIFY2(status->text().contains(QLatin1String("6.5.4")), qPrintable(status->text()));
    auto *queues = page.findChild<QTableView *>(QStringLiteral("bullmqQueues"));
    QVERIFY(rowOf(queues, m_queue) >= 0); // read, all the same
    for (QPushButton *button : page.findChildren<QPushButton *>()) {
        if (button->objectName().startsWith(QLatin1String("bullmqAction-")))
            QVERIFY2(!button->isEnabled(), qPrintable(button->objectName()));
    }
}

// The operator selects a failed job, presses Retry and says yes: BullMQ's getState says
// waiting, the page's counts follow, and the store's audit log names the job and the one
// job moved. Saying no moves nothing.
void TestUiBullMq::aConfirmedRetryRunsThroughBullMqAndIsAudited()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString storeUrl = QStringLiteral("sqlite:") + dir.filePath(QStringLiteral("once.db"));
    QString error;
    auto store = once::Store::open(storeUrl, &error);
    QVERIFY2(store, qPrintable(error));
    StoreSession session(storeUrl);
    QSignalSpy opened(&session, &StoreSession::opened);
    QVERIFY(opened.wait(10000) && opened.constFirst().at(0).toBool());

    BullMqPage page;
    page.resize(1400, 800);
    page.show();
    page.setSession(&session);
    page.connectTo(m_url,
                   QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq/dist/cjs/commands")));
    auto *queues = page.findChild<QTableView *>(QStringLiteral("bullmqQueues"));
    QTRY_VERIFY_WITH_TIMEOUT(rowOf(queues, m_queue) >= 0, 10000);
    const int row = rowOf(queues, m_queue);
    const int failedBefore = queues->model()->index(row, 6).data().toInt();
    QVERIFY(failedBefore > 0);
    queues->setCurrentIndex(queues->model()->index(row, 0));
    auto *states = page.findChild<QTabBar *>(QStringLiteral("bullmqStates"));
    for (int tab = 0; tab < states->count(); ++tab) {
        if (states->tabText(tab) == QLatin1String("failed"))
            states->setCurrentIndex(tab);
    }
    auto *jobs = page.findChild<QTableView *>(QStringLiteral("bullmqJobs"));
    QTRY_COMPARE_WITH_TIMEOUT(jobs->model()->rowCount(), failedBefore, 10000);
    jobs->setCurrentIndex(jobs->model()->index(0, 0));
    const QString id = jobs->model()->index(0, 0).data().toString();
    auto *details = page.findChild<QPlainTextEdit *>(QStringLiteral("bullmqDetails"));
    QTRY_VERIFY_WITH_TIMEOUT(details->toPlainText().contains(QStringLiteral("Job %1 ").arg(id)), 10000);
    auto *retry = page.findChild<QPushButton *>(QStringLiteral("bullmqAction-bullmq-retry"));
    QVERIFY(retry->isEnabled());

    // The operator answers the confirmation: first no, then yes.
    const auto answer = [](QMessageBox::StandardButton button) {
        QTimer::singleShot(100, [button] {
            for (QWidget *widget : QApplication::topLevelWidgets()) {
                if (auto *box = qobject_cast<QMessageBox *>(widget); box && box->isVisible())
                    box->button(button)->click();
            }
        });
    };
    const auto stateOf = [&] {
        QProcess node;
        node.setWorkingDirectory(m_producers);
        node.start(QStringLiteral("node"),
                   {QStringLiteral("bullmq-proof.js"), QStringLiteral("inspect"), QStringLiteral("--url"),
                    m_url, QStringLiteral("--queue"), m_queue, QStringLiteral("--ids"), id});
        node.waitForFinished(30000);
        return QJsonDocument::fromJson(node.readAllStandardOutput())
            .object()
            .value(QLatin1String("states"))
            .toObject()
            .value(id)
            .toString();
    };
    answer(QMessageBox::No);
    retry->click();
    QCOMPARE(stateOf(), QStringLiteral("failed"));

    answer(QMessageBox::Yes);
    retry->click();
    QTRY_COMPARE_WITH_TIMEOUT(queues->model()->index(rowOf(queues, m_queue), 6).data().toInt(),
                              failedBefore - 1, 15000);
    QCOMPARE(stateOf(), QStringLiteral("waiting"));
    // The operator sees what the action did, and the job as it is now.
    auto *status = page.findChild<QLabel *>(QStringLiteral("bullmqStatus"));
    QTRY_VERIFY2_WITH_TIMEOUT(status->text().contains(QLatin1String("bullmq-retry: 1 job")),
                              qPrintable(status->text()), 10000);
    QTRY_VERIFY2_WITH_TIMEOUT(details->toPlainText().contains(QStringLiteral("Job %1 ").arg(id)) &&
                                  details->toPlainText().contains(QLatin1String(": waiting")),
                              qPrintable(details->toPlainText().left(200)), 10000);
    QList<once::AuditEntry> audit;
    QTRY_VERIFY_WITH_TIMEOUT(
        (audit = store->inspector().auditLog(10, &error).value_or(QList<once::AuditEntry>())).size() == 1,
        10000);
    QCOMPARE(audit.constFirst().action, QStringLiteral("bullmq-retry"));
    QCOMPARE(audit.constFirst().count, qint64(1));
    QVERIFY2(audit.constFirst().detail.endsWith(QStringLiteral("jobs=") + id),
             qPrintable(audit.constFirst().detail));
    QVERIFY(!audit.constFirst().detail.contains(QUrl(m_url).password()));
}

QTEST_MAIN(TestUiBullMq)
#include "tst_uibullmq.moc"
