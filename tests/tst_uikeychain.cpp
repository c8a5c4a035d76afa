// A saved connection's password: in the system keychain when the user ticks Remember,
// never in the console's settings file; without a keychain service the console says so
// and asks each time. Against the private PostgreSQL server, whose roles need passwords.
//
// ONCE_TEST_KEYCHAIN=none: the session bus address points where nothing listens, as on a
// server reached over ssh. ONCE_TEST_KEYCHAIN=secret-service: the test starts a private
// dbus-daemon and gnome-keyring-daemon (a real Secret Service) in a folder of its own.
#include "dialogs/postgresdialog.h"
#include "display/storeurl.h"
#include "mainwindow.h"
#include "session/storesession.h"
#include "settings/savedpasswords.h"
#include "settings/settings.h"

#include "store/store.h"
#include "teststores.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <csignal>
#include <functional>
#include <memory>

using namespace once;
using namespace once::ui;

namespace {

QByteArray settingsFileContents()
{
    QSettings settings;
    settings.sync();
    QFile file(settings.fileName());
    return file.open(QIODevice::ReadOnly) ? file.readAll() : QByteArray();
}

// Runs `handle` on the dialog of type T once it is the active modal widget, while
// `open` (which runs the dialog's own event loop) is called. False if none came.
template<typename T> bool withDialog(const std::function<void()> &open, const std::function<void(T *)> &handle)
{
    bool seen = false;
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, [&] {
        auto *dialog = qobject_cast<T *>(QApplication::activeModalWidget());
        if (!dialog)
            return;
        poll.stop();
        seen = true;
        handle(dialog);
    });
    poll.start(20);
    QTimer::singleShot(20000, &poll, [&] {
        if (auto *modal = QApplication::activeModalWidget())
            modal->close();
    });
    open();
    if (!QTest::qWaitFor([&] { return seen; }, 20000))
        return false;
    return true;
}

} // namespace

class TestUiKeychain : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanupTestCase();

    void withoutKeychainTheConsoleSaysSoAndAsksEachTime();
    void rememberedPasswordComesFromTheKeychain();

private:
    bool startSecretService(QString *why);
    bool keychain() const { return m_kind == QLatin1String("secret-service"); }
    std::unique_ptr<MainWindow> newWindow();
    // File > Open PostgreSQL Store…, the dialog filled with the store and its password.
    void openThroughDialog(MainWindow &window, bool remember, const std::function<void(PostgresDialog *)> &check = {});
    // The keychain's entry for the store, read by libsecret's own tool, not by once.
    QString keychainEntry();
    QAction *recentStoreAction(MainWindow &window);

    TestStores m_stores;
    QTemporaryDir m_dir;
    QString m_kind;
    QString m_url;
    QString m_savedUrl;
    QString m_password;
    QList<QProcess *> m_daemons;
    qint64 m_keyringPid = 0;
};

void TestUiKeychain::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    if (!m_stores.isPostgres())
        QSKIP("the passwords are PostgreSQL's (run as tst_uikeychain through ctest)");
    m_kind = qEnvironmentVariable("ONCE_TEST_KEYCHAIN", QStringLiteral("none"));
    // libpq finds no password of its own: what the console gives it is all there is.
    qunsetenv("PGPASSWORD");
    qputenv("PGPASSFILE", m_dir.filePath(QStringLiteral("no-pgpass")).toLocal8Bit());
    qunsetenv("DISPLAY"); // no D-Bus autolaunch through X11
    if (keychain()) {
        QString why;
        if (!startSecretService(&why))
            QSKIP(qPrintable(why));
    } else {
        qputenv("DBUS_SESSION_BUS_ADDRESS",
                QByteArray("unix:path=") + QFile::encodeName(m_dir.filePath(QStringLiteral("no-bus"))));
    }
}

bool TestUiKeychain::startSecretService(QString *why)
{
    for (const char *program : {"dbus-daemon", "gnome-keyring-daemon", "secret-tool"}) {
        if (QStandardPaths::findExecutable(QString::fromLatin1(program)).isEmpty()) {
            *why = QStringLiteral("%1 is not installed (scripts/lib/common.sh installs it)").arg(QString::fromLatin1(program));
            return false;
        }
    }
    // A home of its own: the keyring file goes there, and nothing of the user's is touched.
    const QString home = m_dir.filePath(QStringLiteral("home"));
    QDir().mkpath(home + QStringLiteral("/.local/share"));
    QDir().mkpath(m_dir.filePath(QStringLiteral("run")));
    QFile::setPermissions(m_dir.filePath(QStringLiteral("run")), QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    qputenv("HOME", home.toLocal8Bit());
    qputenv("XDG_DATA_HOME", (home + QStringLiteral("/.local/share")).toLocal8Bit());
    qputenv("XDG_RUNTIME_DIR", m_dir.filePath(QStringLiteral("run")).toLocal8Bit());
    const QString bus = QStringLiteral("unix:path=") + m_dir.filePath(QStringLiteral("bus"));
    auto *dbus = new QProcess(this);
    dbus->setProgram(QStringLiteral("dbus-daemon"));
    dbus->setArguments({QStringLiteral("--session"), QStringLiteral("--nofork"), QStringLiteral("--address=") + bus});
    dbus->start();
    m_daemons << dbus;
    if (!dbus->waitForStarted(10000)
        || !QTest::qWaitFor([&] { return QFile::exists(m_dir.filePath(QStringLiteral("bus"))); }, 10000)) {
        *why = QStringLiteral("dbus-daemon did not start: ") + QString::fromLocal8Bit(dbus->readAllStandardError());
        return false;
    }
    qputenv("DBUS_SESSION_BUS_ADDRESS", bus.toLocal8Bit());
    // --unlock with a password on standard input creates the login keyring and unlocks it,
    // as a desktop login does; it then serves org.freedesktop.secrets on the bus.
    QProcess keyring;
    keyring.setProgram(QStringLiteral("gnome-keyring-daemon"));
    keyring.setArguments({QStringLiteral("--unlock"), QStringLiteral("--components=secrets"), QStringLiteral("--daemonize")});
    keyring.start();
    keyring.write("keyring-test-password");
    keyring.closeWriteChannel();
    if (!keyring.waitForFinished(20000) || keyring.exitCode() != 0) {
        *why = QStringLiteral("gnome-keyring-daemon did not start: ") + QString::fromLocal8Bit(keyring.readAllStandardError());
        return false;
    }
    // It prints GNOME_KEYRING_CONTROL=… and SSH_AUTH_SOCK=…; its pid is found by its name on the bus.
    QProcess owner;
    owner.start(QStringLiteral("dbus-send"),
                {QStringLiteral("--session"), QStringLiteral("--print-reply"), QStringLiteral("--dest=org.freedesktop.DBus"),
                 QStringLiteral("/org/freedesktop/DBus"), QStringLiteral("org.freedesktop.DBus.GetConnectionUnixProcessID"),
                 QStringLiteral("string:org.freedesktop.secrets")});
    if (owner.waitForFinished(10000)) {
        const QByteArray reply = owner.readAllStandardOutput();
        const qsizetype at = reply.indexOf("uint32 ");
        if (at >= 0)
            m_keyringPid = reply.mid(at + 7).trimmed().toLongLong();
    }
    return true;
}

void TestUiKeychain::cleanupTestCase()
{
    if (m_keyringPid > 0)
        ::kill(pid_t(m_keyringPid), SIGTERM);
    for (QProcess *daemon : std::as_const(m_daemons)) {
        daemon->terminate();
        if (!daemon->waitForFinished(5000))
            daemon->kill();
    }
}

void TestUiKeychain::init()
{
    // A fresh store, and settings that remember nothing.
    QSettings().clear();
    m_url = m_stores.newUrl();
    m_password = QUrl(m_url).password();
    QVERIFY(!m_password.isEmpty());
    m_savedUrl = storeUrlWithoutPassword(m_url);
    QString error;
    QVERIFY2(Store::open(m_url, &error) != nullptr, qPrintable(error)); // the store exists
}

std::unique_ptr<MainWindow> TestUiKeychain::newWindow()
{
    auto window = std::make_unique<MainWindow>();
    window->resize(1000, 700);
    window->show();
    // The keychain has answered whether it is there.
    if (!QTest::qWaitFor(
            [&] { return window->savedPasswords()->keychain() != SavedPasswords::Keychain::Unknown; }, 20000))
        qWarning("the keychain did not answer");
    return window;
}

void TestUiKeychain::openThroughDialog(MainWindow &window, bool remember,
                                       const std::function<void(PostgresDialog *)> &check)
{
    auto *action = window.findChild<QAction *>(QStringLiteral("openPostgresStore"));
    QVERIFY(action);
    const bool seen = withDialog<PostgresDialog>([action] { action->trigger(); }, [&](PostgresDialog *dialog) {
        dialog->setUrl(m_url);
        if (check)
            check(dialog);
        dialog->rememberField()->setChecked(remember);
        dialog->accept();
    });
    QVERIFY(seen);
    QVERIFY(window.session());
    // Not a spy made now: the session opens on its own thread, and may have said so already.
    QTRY_VERIFY_WITH_TIMEOUT(window.session()->hasOpened(), 20000);
    QVERIFY2(window.session()->isOpen(), qPrintable(window.session()->openError()));
}

QString TestUiKeychain::keychainEntry()
{
    QProcess lookup;
    lookup.start(QStringLiteral("secret-tool"), {QStringLiteral("lookup"), QStringLiteral("server"),
                                                  QStringLiteral("once-console"), QStringLiteral("user"), m_savedUrl});
    if (!lookup.waitForFinished(20000))
        return QStringLiteral("(secret-tool did not answer)");
    return QString::fromUtf8(lookup.readAllStandardOutput());
}

QAction *TestUiKeychain::recentStoreAction(MainWindow &window)
{
    for (QMenu *menu : window.menuBar()->findChildren<QMenu *>()) {
        if (!menu->title().contains(QLatin1String("Recent")) || menu->objectName() == QLatin1String("recentQueues"))
            continue;
        for (QAction *action : menu->actions()) {
            if (action->text().contains(QUrl(m_url).path().mid(1)))
                return action;
        }
    }
    return nullptr;
}

void TestUiKeychain::withoutKeychainTheConsoleSaysSoAndAsksEachTime()
{
    if (keychain())
        QSKIP("this run has a keychain (ONCE_TEST_KEYCHAIN=none tests its absence)");
    {
        auto window = newWindow();
        QCOMPARE(window->savedPasswords()->keychain(), SavedPasswords::Keychain::Unavailable);
        openThroughDialog(*window, true, [](PostgresDialog *dialog) {
            // Remember cannot be ticked, and the dialog says why and what happens instead.
            QVERIFY(!dialog->rememberField()->isEnabled());
            auto *note = dialog->findChild<QLabel *>(QStringLiteral("keychainNote"));
            QVERIFY(note && !note->isHidden());
            QVERIFY2(note->text().contains(QLatin1String("No system keychain is available"))
                         && note->text().contains(QLatin1String("asks for it each time")),
                     qPrintable(note->text()));
        });
        if (QTest::currentTestFailed())
            return;
        QVERIFY(!window->savedPasswords()->isRemembered(m_savedUrl));
    }
    QVERIFY(!settingsFileContents().isEmpty());
    QVERIFY2(!settingsFileContents().contains(m_password.toUtf8()), "the password is in the settings file");
    QVERIFY(!Settings().recentStores().isEmpty());

    // Next time, Open Recent has no password to give: the open fails and Connect… asks
    // again, the password field empty.
    auto window = newWindow();
    QAction *recent = recentStoreAction(*window);
    QVERIFY(recent);
    recent->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(window->findChild<QMessageBox *>(QStringLiteral("openError")), 20000);
    auto *box = window->findChild<QMessageBox *>(QStringLiteral("openError"));
    bool asked = false;
    const bool seen = withDialog<PostgresDialog>(
        [box] { box->findChild<QPushButton *>(QStringLiteral("connect"))->click(); },
        [&](PostgresDialog *dialog) {
            asked = dialog->passwordField()->text().isEmpty();
            dialog->reject();
        });
    QVERIFY(seen);
    QVERIFY2(asked, "the password was filled in from somewhere");

    // A password remembered while a keychain was there (the marker in the settings) and
    // none now: the dialog comes up by itself, saying so.
    Settings().setPasswordRemembered(m_savedUrl, true);
    window = newWindow();
    recent = recentStoreAction(*window);
    QVERIFY(recent);
    QString message;
    const bool askedByItself = withDialog<PostgresDialog>([recent] { recent->trigger(); }, [&](PostgresDialog *dialog) {
        message = dialog->findChild<QLabel *>(QStringLiteral("keychainNote"))->text();
        dialog->reject();
    });
    QVERIFY(askedByItself);
    QVERIFY2(message.contains(QLatin1String("was remembered, but there is no keychain")), qPrintable(message));
}

void TestUiKeychain::rememberedPasswordComesFromTheKeychain()
{
    if (!keychain())
        QSKIP("needs a Secret Service (ONCE_TEST_KEYCHAIN=secret-service)");
    {
        auto window = newWindow();
        QCOMPARE(window->savedPasswords()->keychain(), SavedPasswords::Keychain::Available);
        openThroughDialog(*window, true, [](PostgresDialog *dialog) {
            QVERIFY(dialog->rememberField()->isEnabled());
            QVERIFY(dialog->findChild<QLabel *>(QStringLiteral("keychainNote"))->isHidden());
        });
        if (QTest::currentTestFailed())
            return;
        QTRY_VERIFY_WITH_TIMEOUT(window->savedPasswords()->isRemembered(m_savedUrl), 20000);
    }
    QCOMPARE(keychainEntry(), m_password);
    const QByteArray settings = settingsFileContents();
    QVERIFY(settings.contains("remembered"));
    QVERIFY2(!settings.contains(m_password.toUtf8()), "the password is in the settings file");

    // Open Recent connects with it, asking nothing.
    {
        auto window = newWindow();
        QAction *recent = recentStoreAction(*window);
        QVERIFY(recent);
        QVERIFY2(recent->toolTip().contains(QLatin1String("keychain")), qPrintable(recent->toolTip()));
        recent->trigger();
        // The keychain answers, then the session opens, both while this waits: a spy made
        // after the first could miss the second (it did, in one run of the whole suite).
        QTRY_VERIFY_WITH_TIMEOUT(window->session() &&
                                     storePassword(window->session()->storeUrl()) == m_password &&
                                     window->session()->hasOpened(),
                                 20000);
        QVERIFY2(window->session()->isOpen(), qPrintable(window->session()->openError()));
        QVERIFY(!QApplication::activeModalWidget());

        // Unticked, it leaves the keychain and the settings.
        openThroughDialog(*window, false, [](PostgresDialog *dialog) { QVERIFY(dialog->rememberField()->isChecked()); });
        if (QTest::currentTestFailed())
            return;
        QVERIFY(!window->savedPasswords()->isRemembered(m_savedUrl));
    }
    QTRY_COMPARE_WITH_TIMEOUT(keychainEntry(), QString(), 20000);
}

QTEST_MAIN(TestUiKeychain)
#include "tst_uikeychain.moc"
