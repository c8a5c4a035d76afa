// The console's benchmark (scripts/bench-console runs it; see docs/performance.md):
//
//   once-console-bench generate --store URL [--events N] [--dead N] [--in-doubt N] ...
//   once-console-bench measure --store URL [--once PATH] [--redrive-seconds S] ...
//
// Two commands, run as two processes, so that the memory the generator uses to fill the
// store never counts in the console's figures.
#include "consolebench.h"
#include "figures.h"

#include "sim/ledgergenerator.h"
#include "store/store.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>

#include <cstdio>

using namespace once;
using namespace once::bench;

namespace {

std::optional<qint64> integerOption(const QCommandLineParser &parser, const QString &name, qint64 fallback)
{
    if (!parser.isSet(name))
        return fallback;
    bool ok = false;
    const qint64 value = parser.value(name).remove(QLatin1Char('_')).remove(QLatin1Char(',')).toLongLong(&ok);
    if (!ok || value < 0) {
        std::fprintf(stderr, "once-console-bench: --%s wants a number, not %s\n", qPrintable(name),
                     qPrintable(parser.value(name)));
        return std::nullopt;
    }
    return value;
}

// The store's size on disk, as far as it can be read.
QString storeSize(Store &store)
{
    qint64 bytes = 0;
    if (store.database().isPostgres()) {
        QSqlQuery query(store.database().connection());
        if (query.exec(QStringLiteral("SELECT pg_database_size(current_database())")) && query.next())
            bytes = query.value(0).toLongLong();
    } else {
        const QString path = store.database().location().path;
        bytes = QFileInfo(path).size() + QFileInfo(path + QStringLiteral("-wal")).size();
    }
    return QStringLiteral("%1 GiB").arg(double(bytes) / (1 << 30), 0, 'f', 2);
}

void printContents(Store &store)
{
    QSqlQuery query(store.database().connection());
    QStringList states;
    if (query.exec(QStringLiteral("SELECT state, COUNT(*) FROM ledger GROUP BY state ORDER BY 2 DESC"))) {
        while (query.next())
            states << QStringLiteral("%1 %2").arg(query.value(0).toString(), thousands(query.value(1).toLongLong()));
    }
    query.finish();
    QStringList others;
    for (const char *table : {"dead_letters", "attempts", "queue", "queue_samples"}) {
        if (query.exec(QStringLiteral("SELECT COUNT(*) FROM %1").arg(QLatin1String(table))) && query.next())
            others << QStringLiteral("%1 %2").arg(QLatin1String(table), thousands(query.value(0).toLongLong()));
        query.finish();
    }
    std::printf("ledger: %s\n%s; %s on disk\n", qPrintable(states.join(QLatin1String(", "))),
                qPrintable(others.join(QLatin1String(", "))), qPrintable(storeSize(store)));
}

int generate(const QCommandLineParser &parser)
{
    LedgerShape shape;
    const auto events = integerOption(parser, QStringLiteral("events"), shape.events);
    if (!events)
        return 2;
    // A small store keeps at most the default counts, and no more than these shares.
    const auto dead = integerOption(parser, QStringLiteral("dead"), std::min(shape.dead, *events / 10));
    const auto inDoubt = integerOption(parser, QStringLiteral("in-doubt"), std::min(shape.inDoubt, *events / 100));
    const auto users = integerOption(parser, QStringLiteral("users"), shape.users);
    const auto days = integerOption(parser, QStringLiteral("days"), shape.days);
    const auto seed = integerOption(parser, QStringLiteral("seed"), qint64(shape.seed));
    if (!dead || !inDoubt || !users || !days || !seed)
        return 2;
    shape.events = *events;
    shape.dead = *dead;
    shape.inDoubt = *inDoubt;
    shape.users = *users;
    shape.days = int(*days);
    shape.seed = quint64(*seed);
    shape.retrying = std::min(shape.retrying, shape.events / 1000);
    shape.claimed = std::min(shape.claimed, shape.events / 10000);
    if (const QString problem = shape.problem(); !problem.isEmpty()) {
        std::fprintf(stderr, "once-console-bench: %s\n", qPrintable(problem));
        return 2;
    }

    QString error;
    auto store = Store::open(parser.value(QStringLiteral("store")), &error);
    if (!store) {
        std::fprintf(stderr, "once-console-bench: %s\n", qPrintable(error));
        return 1;
    }
    if (parser.isSet(QStringLiteral("reuse"))) {
        QSqlQuery query(store->database().connection());
        if (query.exec(QStringLiteral("SELECT EXISTS (SELECT 1 FROM ledger)")) && query.next() && query.value(0).toBool()) {
            std::printf("reusing the events already in %s\n", qPrintable(store->database().location().displayName()));
            query.finish();
            printContents(*store);
            return 0;
        }
    }
    std::printf("generating %s events (%s dead, %s in doubt) in %s, seed %llu\n", qPrintable(thousands(shape.events)),
                qPrintable(thousands(shape.dead)), qPrintable(thousands(shape.inDoubt)),
                qPrintable(store->database().location().displayName()), static_cast<unsigned long long>(shape.seed));
    std::fflush(stdout);
    QElapsedTimer clock;
    clock.start();
    LedgerGenerator generator(store->database(), shape);
    const bool filled = generator.fill(&error, [&clock](const QString &step) {
        std::fprintf(stderr, "[%7.1f s] %s\n", double(clock.elapsed()) / 1000, qPrintable(step));
    });
    if (!filled) {
        std::fprintf(stderr, "once-console-bench: %s\n", qPrintable(error));
        return 1;
    }
    std::printf("generated %s events in %.1f s\n", qPrintable(thousands(shape.events)), double(clock.elapsed()) / 1000);
    printContents(*store);
    return 0;
}

int measure(const QCommandLineParser &parser)
{
    ConsoleBench::Options options;
    options.storeUrl = parser.value(QStringLiteral("store"));
    options.onceBinary = parser.isSet(QStringLiteral("once"))
                             ? parser.value(QStringLiteral("once"))
                             : QCoreApplication::applicationDirPath() + QStringLiteral("/../../app/once/once");
    const auto repeats = integerOption(parser, QStringLiteral("repeat"), options.repeats);
    const auto scroll = integerOption(parser, QStringLiteral("scroll-seconds"), options.scrollBudgetMs / 1000);
    const auto redrive = integerOption(parser, QStringLiteral("redrive-seconds"), options.redriveSeconds);
    const auto rate = integerOption(parser, QStringLiteral("redrive-rate"), options.redriveRate);
    if (!repeats || !scroll || !redrive || !rate)
        return 2;
    options.repeats = std::max(1, int(*repeats));
    options.scrollBudgetMs = *scroll * 1000;
    options.redriveSeconds = int(*redrive);
    options.redriveRate = int(*rate);
    ConsoleBench bench(options);
    return bench.run() ? 0 : 1;
}

} // namespace

int main(int argc, char *argv[])
{
    // The pages need a QApplication; no screen is needed.
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QCoreApplication::setOrganizationName(QStringLiteral("once"));
    QCoreApplication::setApplicationName(QStringLiteral("once-console-bench"));
    // The pages read and write the console's settings: not the operator's own.
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));

    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral("The console's benchmark: `generate` fills a new store with a large ledger, `measure` drives "
                       "the console's models over it and prints each figure."));
    parser.addHelpOption();
    parser.addPositionalArgument(QStringLiteral("command"), QStringLiteral("generate or measure"));
    parser.addOptions({
        {QStringLiteral("store"), QStringLiteral("The store (sqlite:PATH or postgres://...)."), QStringLiteral("URL")},
        {QStringLiteral("events"), QStringLiteral("generate: events in the ledger (10,000,000)."), QStringLiteral("N")},
        {QStringLiteral("dead"), QStringLiteral("generate: of them dead-lettered (100,000)."), QStringLiteral("N")},
        {QStringLiteral("in-doubt"), QStringLiteral("generate: of them in doubt (10,000)."), QStringLiteral("N")},
        {QStringLiteral("users"), QStringLiteral("generate: distinct users (one per twenty events)."), QStringLiteral("N")},
        {QStringLiteral("days"), QStringLiteral("generate: days the events span (30)."), QStringLiteral("N")},
        {QStringLiteral("seed"), QStringLiteral("generate: the seed; the same seed, the same store (1)."), QStringLiteral("N")},
        {QStringLiteral("reuse"), QStringLiteral("generate: keep the events a store already holds.")},
        {QStringLiteral("once"), QStringLiteral("measure: the once binary, for once stats."), QStringLiteral("PATH")},
        {QStringLiteral("repeat"), QStringLiteral("measure: runs of each figure (3)."), QStringLiteral("N")},
        {QStringLiteral("scroll-seconds"), QStringLiteral("measure: how long scrolling may take (180)."), QStringLiteral("S")},
        {QStringLiteral("redrive-seconds"),
         QStringLiteral("measure: redrive every dead letter for S seconds, then cancel; this changes the store (0: no)."),
         QStringLiteral("S")},
        {QStringLiteral("redrive-rate"), QStringLiteral("measure: the redrive's rate, letters a second (100)."),
         QStringLiteral("N")},
    });
    parser.process(app);
    const QString command = parser.positionalArguments().value(0);
    if (!parser.isSet(QStringLiteral("store")) || (command != QLatin1String("generate") && command != QLatin1String("measure"))) {
        std::fprintf(stderr, "%s", qPrintable(parser.helpText()));
        return 2;
    }
    return command == QLatin1String("generate") ? generate(parser) : measure(parser);
}
