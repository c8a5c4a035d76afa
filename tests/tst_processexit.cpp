// A process that ends while a thread that used OpenSSL is still ending. QThread::wait()
// returns once the thread's function has returned, before its thread-local destructors
// (OpenSSL's among them) have run, so a worker can be past the end of main() while its store
// thread is still freeing its OpenSSL state. If OpenSSL tears itself down at exit meanwhile,
// both free that thread's handler list: a worker exited 6 ("double free") after its work was
// done in the SQS scale-out suite. The child (this executable with --child) makes the
// window certain: its thread stops inside OpenSSL's destructor until the exit handlers have
// run, and its allocator hooks (CRYPTO_set_mem_functions) name a block freed twice instead
// of leaving it to chance. once::skipOpenSslTeardownAtExit() is what once's main() calls.
#include "http/opensslteardown.h"

#include <QProcess>
#include <QTest>
#include <QThread>

#include <openssl/crypto.h>
#include <openssl/err.h>

#include <pthread.h>
#include <semaphore.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace {

const char ChildArgument[] = "--child";

sem_t teardownBegan;     // OpenSSL's exit handler has begun, or has not run at all
sem_t threadHeld;        // the thread has stopped inside OpenSSL's destructor
sem_t exitHandlersRan;   // OpenSSL's exit handler, if any, is done: the thread may go on
sem_t lastDestructorRan; // the thread has finished ending
pthread_key_t firstKey;  // made before OpenSSL's key: its destructor runs before OpenSSL's
pthread_key_t secondKey; // made after: its destructor runs after OpenSSL's
thread_local bool threadEnding = false;

bool waitUpTo(sem_t *semaphore, int seconds)
{
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += seconds;
    while (sem_timedwait(semaphore, &deadline) != 0) {
        if (errno != EINTR)
            return false;
    }
    return true;
}

// Every block OpenSSL holds, so that freeing one twice is seen the moment it happens.
std::mutex blocksLock;
std::unordered_set<void *> &liveBlocks()
{
    static auto *blocks = new std::unordered_set<void *>; // never destroyed: used until _exit
    return *blocks;
}

void *allocate(size_t size, const char *, int)
{
    void *block = std::malloc(size);
    const std::lock_guard lock(blocksLock);
    liveBlocks().insert(block);
    return block;
}

void release(void *block, const char *, int)
{
    if (!block)
        return;
    if (threadEnding) {
        // The thread's first free inside OpenSSL's destructor (its error queue's state): it
        // stays here, its handler list half walked, until the exit handlers have run.
        threadEnding = false;
        sem_post(&threadHeld);
        waitUpTo(&exitHandlersRan, 10);
    }
    {
        const std::lock_guard lock(blocksLock);
        if (liveBlocks().erase(block) == 0) {
            std::fputs("OpenSSL freed a block twice\n", stdout);
            std::fflush(stdout);
            std::abort();
        }
    }
    std::free(block);
}

void *reallocate(void *block, size_t size, const char *file, int line)
{
    if (!block)
        return allocate(size, file, line);
    void *moved = std::realloc(block, size);
    const std::lock_guard lock(blocksLock);
    liveBlocks().erase(block);
    liveBlocks().insert(moved);
    return moved;
}

// OPENSSL_cleanup() runs this after it has stopped the main thread's OpenSSL state and
// before it frees every thread's: the thread may now enter OpenSSL's destructor, and
// OPENSSL_cleanup() goes on once the thread is held inside it.
void onOpenSslTeardown()
{
    std::puts("OpenSSL tears itself down");
    sem_post(&teardownBegan);
    waitUpTo(&threadHeld, 10);
}

// Registered before OpenSSL's first use, so it runs after OpenSSL's own exit handler
// (atexit runs them in reverse): lets the thread go on, and waits for it to end, so that the
// process cannot leave before OpenSSL's destructor has finished.
void onExit()
{
    std::puts("exit handlers ran");
    sem_post(&teardownBegan);
    sem_post(&exitHandlersRan);
    if (waitUpTo(&lastDestructorRan, 10))
        std::puts("the thread ended after them");
    std::fflush(stdout);
}

void holdUntilTeardown(void *)
{
    waitUpTo(&teardownBegan, 10);
    threadEnding = true;
}

void signalLastDestructorRan(void *)
{
    sem_post(&lastDestructorRan);
}

int runChild(bool skipTeardown)
{
    if (!CRYPTO_set_mem_functions(allocate, reallocate, release)) {
        std::puts("OpenSSL allocated before its allocator could be set");
        return 1;
    }
    sem_init(&teardownBegan, 0, 0);
    sem_init(&threadHeld, 0, 0);
    sem_init(&exitHandlersRan, 0, 0);
    sem_init(&lastDestructorRan, 0, 0);
    pthread_key_create(&firstKey, holdUntilTeardown);
    std::atexit(onExit);
    if (skipTeardown && !once::skipOpenSslTeardownAtExit()) {
        std::puts("OpenSSL did not initialise");
        return 1;
    }
    OPENSSL_atexit(onOpenSslTeardown);
    QThread *thread = QThread::create([] {
        pthread_setspecific(firstKey, &firstKey);
        // The thread's first use of OpenSSL's error queue gives it OpenSSL state of its own,
        // freed by OpenSSL's thread-local destructor, as Qt's TLS backend does on a store thread.
        ERR_set_mark();
        ERR_pop_to_mark();
        pthread_key_create(&secondKey, signalLastDestructorRan);
        pthread_setspecific(secondKey, &secondKey);
    });
    thread->start();
    thread->wait();
    std::puts("main returns while the thread is still ending");
    std::fflush(stdout);
    return 0;
}

} // namespace

class ProcessExitTest : public QObject
{
    Q_OBJECT

private slots:
    void aThreadEndingAfterMainLeavesOpenSslStanding_data();
    void aThreadEndingAfterMainLeavesOpenSslStanding();
};

void ProcessExitTest::aThreadEndingAfterMainLeavesOpenSslStanding_data()
{
    QTest::addColumn<bool>("skipTeardown");
    QTest::addColumn<bool>("survives");
    // The first row shows that the window is real: without the call, the same child dies.
    QTest::newRow("OpenSSL's teardown at exit") << false << false;
    QTest::newRow("once's main(): no teardown") << true << true;
}

void ProcessExitTest::aThreadEndingAfterMainLeavesOpenSslStanding()
{
    QFETCH(bool, skipTeardown);
    QFETCH(bool, survives);
    QProcess child;
    child.setProcessChannelMode(QProcess::SeparateChannels);
    child.start(
        QCoreApplication::applicationFilePath(),
        {QString::fromLatin1(ChildArgument), skipTeardown ? QStringLiteral("skip") : QStringLiteral("keep")});
    QVERIFY(child.waitForFinished(30000));
    const QByteArray out = child.readAllStandardOutput();
    const QByteArray err = child.readAllStandardError();
    const QByteArray said = "stdout:\n" + out + "stderr:\n" + err;
    // The window was open: main() returned and the exit handlers ran while the thread had
    // yet to free its OpenSSL state.
    QVERIFY2(out.contains("main returns while the thread is still ending") &&
                 out.contains("exit handlers ran"),
             said.constData());
    if (survives) {
        QCOMPARE(child.exitStatus(), QProcess::NormalExit);
        QVERIFY2(child.exitCode() == 0, said.constData());
        QVERIFY2(out.contains("the thread ended after them"), said.constData());
        QVERIFY2(!out.contains("OpenSSL tears itself down"), said.constData());
    } else if (child.exitStatus() == QProcess::CrashExit) {
        QVERIFY2(out.contains("OpenSSL freed a block twice"), said.constData());
    } else {
        QSKIP(qPrintable(
            QStringLiteral("this OpenSSL (%1) no longer frees an ending thread's state twice at exit")
                .arg(QString::fromLatin1(OpenSSL_version(OPENSSL_VERSION)))));
    }
}

int main(int argc, char *argv[])
{
    if (argc == 3 && std::strcmp(argv[1], ChildArgument) == 0)
        return runChild(std::strcmp(argv[2], "skip") == 0);
    QCoreApplication app(argc, argv);
    ProcessExitTest test;
    return QTest::qExec(&test, argc, argv);
}

#include "tst_processexit.moc"
