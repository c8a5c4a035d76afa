#include "mainwindow.h"
#include "session/demo.h"
#include "session/enginecontroller.h"
#include "settings/settings.h"

#include "http/opensslteardown.h"
#include "monitoring/crashreport.h"
#include "queues/queuebackend.h"
#include "store/database.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QHostInfo>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QTimer>

#include <cstdio>
#include <cstdlib>

namespace {

void nameApplication()
{
    QCoreApplication::setOrganizationName(QStringLiteral("once"));
    QCoreApplication::setApplicationName(QStringLiteral("once-console"));
    QCoreApplication::setApplicationVersion(QStringLiteral(ONCE_VERSION));
}

void addOptions(QCommandLineParser &parser)
{
    parser.setApplicationDescription(QStringLiteral("The operations console of once."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOption({QStringLiteral("store"),
                      QStringLiteral("Open this store: a SQLite file, sqlite:PATH or postgres://USER@HOST[:PORT]/DB "
                                     "(the password from PGPASSWORD or ~/.pgpass, as psql does; the console never "
                                     "shows or saves one)."),
                      QStringLiteral("url")});
    parser.addOption({QStringLiteral("queue"),
                      QStringLiteral("Read the queue at a broker, the ledger staying in the store: %1 (default: "
                                     "$ONCE_QUEUE). The console never shows or saves the password.")
                          .arg(once::queueUrlSyntaxes()),
                      QStringLiteral("url")});
    parser.addOption(
        {QStringLiteral("bullmq"),
         QStringLiteral("Open the BullMQ page on this Redis: redis://[[USER]:PASSWORD@]HOST[:PORT]/DB."),
         QStringLiteral("url")});
    parser.addOption(
        {QStringLiteral("bullmq-scripts"),
         QStringLiteral("The commands folder of the team's bullmq package, for the BullMQ page's actions "
                        "(default: ./node_modules/bullmq/dist/cjs/commands)."),
         QStringLiteral("dir")});
    parser.addOption({QStringLiteral("read-only"),
                      QStringLiteral("Only look: open every store read-only (no schema upgrade, no journal mode "
                                     "change), create none, and disable the worker, redrive, discard and resolve.")});
    parser.addOption({QStringLiteral("demo"),
                      QStringLiteral("Open a fresh demo store with a simulated partner, a producer and a running worker.")});
    parser.addOption({QStringLiteral("screenshots"),
                      QStringLiteral("Save every page as PNG into DIR after --screenshot-delay seconds, then quit."),
                      QStringLiteral("dir")});
    parser.addOption({QStringLiteral("screenshot-delay"), QStringLiteral("Seconds to wait before --screenshots."),
                      QStringLiteral("s"), QStringLiteral("20")});
}

// --help, --version and a mistyped option are answered in the terminal, also on a server
// or over ssh without a display, where QApplication cannot start: the command line is read
// before it, and only a window needs it.
void answerWithoutWindow(int argc, char *argv[])
{
    QStringList arguments;
    for (int i = 0; i < argc; ++i)
        arguments << QString::fromLocal8Bit(argv[i]);
    QCommandLineParser parser;
    addOptions(parser);
    const bool parsed = parser.parse(arguments);
    const bool answered = !parsed || parser.isSet(QStringLiteral("help")) || parser.isSet(QStringLiteral("help-all"))
                          || parser.isSet(QStringLiteral("version"));
    if (parsed && !answered && parser.isSet(QStringLiteral("read-only")) && parser.isSet(QStringLiteral("demo"))) {
        std::fputs("once-console: --read-only and --demo do not go together: the demo runs a worker, which writes\n",
                   stderr);
        std::exit(2);
    }
    if (!answered)
        return;
    QCoreApplication app(argc, argv);
    nameApplication();
    parser.process(app); // prints the answer or the error, and exits
}

} // namespace

int main(int argc, char *argv[])
{
    once::reportCrashesOnStderr("once-console");
    once::skipOpenSslTeardownAtExit();
    answerWithoutWindow(argc, argv);
    QApplication app(argc, argv);
    nameApplication();
    QApplication::setApplicationDisplayName(QStringLiteral("once console"));
    QApplication::setDesktopFileName(QStringLiteral("once-console"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false"));

    QCommandLineParser parser;
    addOptions(parser);
    parser.process(app);

    once::ui::MainWindow window;
    window.setReadOnly(parser.isSet(QStringLiteral("read-only")));
    once::ui::Demo demo;
    if (parser.isSet(QStringLiteral("demo"))) {
        QString error;
        if (!demo.start(&error)) {
            QMessageBox::critical(nullptr, QObject::tr("The demo cannot start"), error);
            return 1;
        }
        window.openStore(demo.storeUrl(), QString(), once::StoreReader::IfMissing::Create);
        once::EngineConfig config;
        config.storeUrl = demo.storeUrl();
        config.partnerUrl = demo.partnerUrl();
        config.workerId = QStringLiteral("console-demo@%1").arg(QHostInfo::localHostName());
        config.concurrency = 16;
        config.maxAttempts = 5;
        config.backoffBaseMs = 500;
        config.backoffCapMs = 20000;
        window.engine()->start(config);
    } else {
        // As for once itself: --queue, else $ONCE_QUEUE, else the store's own queue.
        const QString queueUrl = parser.isSet(QStringLiteral("queue")) ? parser.value(QStringLiteral("queue"))
                                                                       : qEnvironmentVariable("ONCE_QUEUE");
        if (parser.isSet(QStringLiteral("store"))) {
            window.openStore(parser.value(QStringLiteral("store")), queueUrl);
        } else {
            const QStringList recent = once::ui::Settings().recentStores();
            window.openSavedStore(recent.isEmpty() ? once::defaultStoreUrl() : recent.constFirst(), queueUrl);
        }
    }
    if (parser.isSet(QStringLiteral("bullmq")))
        window.openBullMq(parser.value(QStringLiteral("bullmq")),
                          parser.value(QStringLiteral("bullmq-scripts")));
    window.show();
    if (parser.isSet(QStringLiteral("screenshots"))) {
        const QString folder = parser.value(QStringLiteral("screenshots"));
        QDir().mkpath(folder);
        QTimer::singleShot(parser.value(QStringLiteral("screenshot-delay")).toInt() * 1000, &window, [&window, folder] {
            window.saveScreenshots(folder, [] { QApplication::quit(); });
        });
    }
    return QApplication::exec();
}
