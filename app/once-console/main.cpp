#include "demo.h"
#include "enginecontroller.h"
#include "mainwindow.h"
#include "settings.h"

#include "database.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QHostInfo>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QTimer>

int main(int argc, char *argv[])
{
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-console"));
    QApplication::setApplicationDisplayName(QStringLiteral("once console"));
    QApplication::setApplicationVersion(QStringLiteral(ONCE_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("once-console"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("The operations console of once."));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOption({QStringLiteral("store"),
                      QStringLiteral("Open this store: a SQLite file, sqlite:PATH or postgres://USER@HOST[:PORT]/DB "
                                     "(the password from PGPASSWORD or ~/.pgpass, as psql does; the console never "
                                     "shows or saves one)."),
                      QStringLiteral("url")});
    parser.addOption({QStringLiteral("queue"),
                      QStringLiteral("Read the queue at a broker, the ledger staying in the store: "
                                     "amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME[&management=URL] or "
                                     "redis://[:PASSWORD@]HOST[:PORT]/DB?stream=NAME (default: $ONCE_QUEUE). The "
                                     "console never shows or saves the password."),
                      QStringLiteral("url")});
    parser.addOption({QStringLiteral("demo"),
                      QStringLiteral("Open a fresh demo store with a simulated partner, a producer and a running worker.")});
    parser.addOption({QStringLiteral("screenshots"),
                      QStringLiteral("Save every page as PNG into DIR after --screenshot-delay seconds, then quit."),
                      QStringLiteral("dir")});
    parser.addOption({QStringLiteral("screenshot-delay"), QStringLiteral("Seconds to wait before --screenshots."),
                      QStringLiteral("s"), QStringLiteral("20")});
    parser.process(app);

    once::ui::MainWindow window;
    once::ui::Demo demo;
    if (parser.isSet(QStringLiteral("demo"))) {
        QString error;
        if (!demo.start(&error)) {
            QMessageBox::critical(nullptr, QObject::tr("The demo cannot start"), error);
            return 1;
        }
        window.openStore(demo.storeUrl());
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
            window.openStore(recent.isEmpty() ? once::defaultStoreUrl() : recent.constFirst(), queueUrl);
        }
    }
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
