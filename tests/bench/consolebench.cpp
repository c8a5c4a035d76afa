#include "consolebench.h"

#include "figures.h"

#include "models/deadlettersmodel.h"
#include "models/eventsmodel.h"
#include "models/indoubtmodel.h"
#include "operator/storereader.h"
#include "pages/deadletterspage.h"
#include "pages/indoubtpage.h"
#include "session/storesession.h"
#include "store/store.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTimer>

#include <cstdio>

namespace once::bench {

namespace {

// The targets.
constexpr double FirstPageTargetMs = 100;
constexpr double SearchTargetMs = 50;
constexpr double OverviewTargetMs = 200;
constexpr qint64 Depths[] = {0, 10'000, 100'000, 1'000'000};
constexpr qint64 MinuteMs = 60'000;

void note(const QString &text)
{
    std::fprintf(stderr, "once-console-bench: %s\n", qPrintable(text));
}

} // namespace

ConsoleBench::ConsoleBench(Options options) : m_options(std::move(options)) {}

ConsoleBench::~ConsoleBench() = default;

bool ConsoleBench::run()
{
    if (!readSamples() || !openSession())
        return false;
    std::printf("store %s: %s events, %s dead letters; load average %s\n", qPrintable(m_session->displayName()),
                qPrintable(thousands(m_events)), qPrintable(thousands(m_deadLetters)), qPrintable(loadAverage()));
    std::printf("%-46s %12s  %-11s %-5s %s\n", "figure", "median", "target", "", "");
    printMemory(QStringLiteral("opening the store"));
    eventsFirstPage();
    searches();
    overview();
    onceStats();
    deadLettersPage();
    inDoubtPage();
    exportDeadLetters();
    printMemory(QStringLiteral("every page once"));
    if (m_options.redriveSeconds > 0)
        redriveAllMatching();
    // Last, the longest step. The model keeps a window of pages, not every row it passes
    // (EventsModel::DefaultResidentPages): its memory figure is what a deep scroll holds.
    scroll();
    printValue(QStringLiteral("peak resident memory"), peakResidentMiB(), QStringLiteral("MiB"), MemoryTargetMiB);
    std::printf("load average at the end %s\n", qPrintable(loadAverage()));
    return m_complete;
}

// What to search for, taken from the store itself on a connection of this thread (closed
// again before anything is measured): events from the middle of the ledger. The user is
// whoever owns the event there, so more likely a frequent one, as with a real search.
bool ConsoleBench::readSamples()
{
    QString error;
    auto store = Store::open(m_options.storeUrl, &error, Database::Access::ReadOnly);
    if (!store) {
        note(error);
        return false;
    }
    const QString ordinal = store->database().isPostgres() ? QStringLiteral("seq") : QStringLiteral("rowid");
    QSqlQuery query(store->database().connection());
    if (!query.exec(QStringLiteral("SELECT (SELECT MAX(%1) FROM ledger), (SELECT COUNT(*) FROM dead_letters)").arg(ordinal))
        || !query.next()) {
        note(query.lastError().text());
        return false;
    }
    m_events = query.value(0).toLongLong();
    m_deadLetters = query.value(1).toLongLong();
    query.finish();
    const auto column = [&](qint64 at, const char *name) {
        QSqlQuery row(store->database().connection());
        if (!row.exec(QStringLiteral("SELECT %1 FROM ledger WHERE %2 = %3").arg(QLatin1String(name), ordinal).arg(at))
            || !row.next())
            return QString();
        return row.value(0).toString();
    };
    m_user = column(m_events / 2, "user_id");
    m_eventId = column(m_events / 3, "event_id");
    m_sendKey = column(2 * m_events / 3, "send_key");
    if (m_events == 0 || m_user.isEmpty() || m_eventId.isEmpty() || m_sendKey.isEmpty()) {
        note(QStringLiteral("the store has no events to measure: generate them first"));
        return false;
    }
    return true;
}

bool ConsoleBench::openSession()
{
    m_session = std::make_unique<ui::StoreSession>(m_options.storeUrl);
    QObject::connect(m_session.get(), &ui::StoreSession::failed, m_session.get(),
                     [](quint64, const QString &error) { note(QStringLiteral("the store failed: ") + error); });
    // The reader opens the store on its thread; its answer comes through this thread's loop.
    std::optional<bool> opened;
    QString error = QStringLiteral("the store did not open within a minute");
    const auto connection = QObject::connect(m_session.get(), &ui::StoreSession::opened, m_session.get(),
                                             [&](bool ok, const QString &why) {
                                                 opened = ok;
                                                 error = why;
                                             });
    runUntil([&] { return opened.has_value(); }, MinuteMs);
    QObject::disconnect(connection);
    if (opened.value_or(false))
        return true;
    note(error);
    return false;
}

// Opening the Events page: its model asks for the first page (and, after it, the total).
void ConsoleBench::eventsFirstPage()
{
    ui::EventsModel model;
    model.setSession(m_session.get());
    QList<double> pages;
    QList<double> counts;
    for (int run = 0; run < m_options.repeats; ++run) {
        QElapsedTimer clock;
        clock.start();
        const auto page = timeUntil(&model, &ui::EventsModel::pageLoaded, [&] { model.setFilter(EventFilter()); });
        if (!page) {
            m_complete = false;
            break;
        }
        pages << *page;
        // The total follows the page on the same reader; the next request waits for it.
        if (runUntil([&] { return model.total() >= 0; }, 10 * MinuteMs))
            counts << double(clock.nsecsElapsed()) / 1e6;
    }
    printFigure(QStringLiteral("events: first page"), pages, FirstPageTargetMs);
    printFigure(QStringLiteral("events: total counted (after the first page)"), counts, std::nullopt,
                QStringLiteral("%1 events").arg(thousands(model.total())));
}

void ConsoleBench::searches()
{
    ui::EventsModel model;
    model.setSession(m_session.get());
    const struct
    {
        const char *what;
        QString text;
    } searches[] = {{"events: search by user", m_user},
                    {"events: search by event id", m_eventId},
                    {"events: search by send key", m_sendKey},
                    // A prefix: the user's, which a few of the busiest users share, and one
                    // no event has, the one that used to read the whole ledger.
                    {"events: search by a prefix", m_user + QLatin1Char('*')},
                    {"events: search by a prefix nothing has", QStringLiteral("no-such-id*")}};
    for (const auto &search : searches) {
        EventFilter filter;
        filter.text = search.text;
        QList<double> runs;
        for (int run = 0; run < m_options.repeats; ++run) {
            const auto page = timeUntil(&model, &ui::EventsModel::pageLoaded, [&] { model.setFilter(filter); });
            if (!page) {
                m_complete = false;
                break;
            }
            runs << *page;
            runUntil([&] { return model.total() >= 0; }, 10 * MinuteMs);
        }
        printFigure(QLatin1String(search.what), runs, SearchTargetMs,
                    QStringLiteral("%1: %2 events").arg(search.text, thousands(model.total())));
    }
}

// The Overview's numbers and charts over each of its windows, and the status bar's health
// reading that every page's refresh brings along.
void ConsoleBench::overview()
{
    const struct
    {
        const char *what;
        qint64 windowMs;
        qint64 bucketMs;
    } windows[] = {{"overview: last 15 minutes", 15 * MinuteMs, 15'000},
                   {"overview: last hour", 60 * MinuteMs, MinuteMs},
                   {"overview: last 24 hours", 24 * 60 * MinuteMs, 15 * MinuteMs}};
    for (const auto &window : windows) {
        QList<double> runs;
        for (int run = 0; run < m_options.repeats; ++run) {
            if (const auto loaded = timeUntil(m_session.get(), &ui::StoreSession::overviewLoaded,
                                              [&] { m_session->loadOverview(window.windowMs, window.bucketMs); }))
                runs << *loaded;
        }
        printFigure(QLatin1String(window.what), runs, OverviewTargetMs);
    }
    QList<double> runs;
    for (int run = 0; run < m_options.repeats; ++run) {
        if (const auto loaded = timeUntil(m_session.get(), &ui::StoreSession::healthLoaded, [&] { m_session->loadHealth(); }))
            runs << *loaded;
    }
    printFigure(QStringLiteral("status bar: health reading"), runs, OverviewTargetMs);
}

// `once stats --json` as an operator runs it: a process of its own, start to exit.
void ConsoleBench::onceStats()
{
    QList<double> runs;
    QString failure;
    for (int run = 0; run < m_options.repeats; ++run) {
        QProcess process;
        QElapsedTimer clock;
        clock.start();
        process.start(m_options.onceBinary,
                      {QStringLiteral("stats"), QStringLiteral("--store"), m_options.storeUrl, QStringLiteral("--json")});
        if (!process.waitForFinished(10 * int(MinuteMs)) || process.exitStatus() != QProcess::NormalExit
            || process.exitCode() != 0) {
            failure = QString::fromLocal8Bit(process.readAllStandardError()).trimmed();
            if (failure.isEmpty())
                failure = process.errorString();
            break;
        }
        runs << double(clock.nsecsElapsed()) / 1e6;
    }
    printFigure(QStringLiteral("once stats --json (process)"), runs, OverviewTargetMs, failure);
}

// The Dead letters page as it is: refresh() asks for the letters it shows, and the
// measure ends once the page has put them in its table.
void ConsoleBench::deadLettersPage()
{
    ui::DeadLettersPage page;
    page.setSession(m_session.get());
    const auto *model = page.findChild<ui::DeadLettersModel *>();
    QList<double> runs;
    for (int run = 0; run < m_options.repeats; ++run) {
        // Connected after the page, so this runs once the page has handled the answer.
        if (const auto loaded = timeUntil(m_session.get(), &ui::StoreSession::deadLettersLoaded, [&] { page.refresh(); }))
            runs << *loaded;
    }
    printFigure(QStringLiteral("dead letters: page shown"), runs, FirstPageTargetMs,
                QStringLiteral("%1 rows of %2 (the first run fills the table, the others compare)")
                    .arg(thousands(model ? model->rowCount() : 0), thousands(m_deadLetters)));
}

// The In doubt page as it is: it shows the first page of events as soon as it arrives
// and the rest as the reader goes on; timed to each, a new page each run.
void ConsoleBench::inDoubtPage()
{
    QList<double> firstRuns;
    QList<double> allRuns;
    int rows = 0;
    for (int run = 0; run < m_options.repeats; ++run) {
        ui::InDoubtPage page;
        page.setSession(m_session.get());
        const auto *model = page.findChild<ui::InDoubtModel *>();
        std::optional<double> first;
        std::optional<double> all;
        QElapsedTimer clock;
        // Connected after the page, so this runs once the page has handled each page.
        const auto connection = QObject::connect(
            m_session.get(), &ui::StoreSession::inDoubtLoaded, m_session.get(),
            [&](quint64, const QList<EventRow> &, bool complete) {
                const double elapsedMs = double(clock.nsecsElapsed()) / 1e6;
                if (!first)
                    first = elapsedMs;
                if (complete)
                    all = elapsedMs;
            });
        clock.start();
        page.refresh();
        runUntil([&] { return all.has_value(); }, 10 * MinuteMs);
        QObject::disconnect(connection);
        if (!all)
            break;
        firstRuns << *first;
        allRuns << *all;
        rows = model ? model->rowCount() : 0;
    }
    printFigure(QStringLiteral("in doubt: first rows shown"), firstRuns, FirstPageTargetMs,
                QStringLiteral("%1 rows at most").arg(StoreReader::InDoubtPageRows));
    printFigure(QStringLiteral("in doubt: every row shown"), allRuns, std::nullopt,
                QStringLiteral("%1 events").arg(thousands(rows)));
}

// Scrolling the Events page down, as a view does: fetchMore() whenever the last row shows,
// one page at a time, timing each page. Stops at the deepest depth, or once a page or the
// whole scroll takes too long.
void ConsoleBench::scroll()
{
    ui::EventsModel model;
    model.setSession(m_session.get());
    const auto top = timeUntil(&model, &ui::EventsModel::pageLoaded, [&] { model.setFilter(EventFilter()); });
    if (!top || !runUntil([&] { return model.total() >= 0; }, 10 * MinuteMs)) {
        m_complete = false;
        return;
    }
    printFigure(QStringLiteral("events: scrolled, page at row 0"), {*top}, FirstPageTargetMs);
    const qint64 deepest = std::min<qint64>(Depths[std::size(Depths) - 1], m_events - ui::EventsModel::PageSize);
    QElapsedTimer scrolling;
    scrolling.start();
    qsizetype nextDepth = 1; // the first page is depth 0, measured above
    QString stopped;
    double lastPageMs = 0;
    QElapsedTimer sinceNote;
    sinceNote.start();
    while (model.rowCount() <= deepest && model.canFetchMore(QModelIndex())) {
        const qint64 offset = model.rowCount();
        const auto page = timeUntil(&model, &ui::EventsModel::pageLoaded, [&] { model.fetchMore(QModelIndex()); },
                                    m_options.slowPageMs * 4);
        if (!page) {
            stopped = QStringLiteral("the page at row %1 took over %2 s").arg(thousands(offset)).arg(m_options.slowPageMs * 4 / 1000);
            break;
        }
        lastPageMs = *page;
        while (nextDepth < qsizetype(std::size(Depths)) && offset >= Depths[nextDepth]) {
            printFigure(QStringLiteral("events: scrolled, page at row %1").arg(thousands(offset)), {*page}, FirstPageTargetMs,
                        QStringLiteral("%1 s into the scroll").arg(double(scrolling.elapsed()) / 1000, 0, 'f', 1));
            ++nextDepth;
        }
        if (*page > m_options.slowPageMs) {
            stopped = QStringLiteral("too slow: the page at row %1 took %2 ms").arg(thousands(offset)).arg(*page, 0, 'f', 0);
            break;
        }
        if (scrolling.elapsed() > m_options.scrollBudgetMs) {
            stopped = QStringLiteral("too slow: %1 s of scrolling reached row %2 only")
                          .arg(m_options.scrollBudgetMs / 1000)
                          .arg(thousands(model.rowCount()));
            break;
        }
        if (sinceNote.elapsed() > 10'000) {
            note(QStringLiteral("scrolled to row %1, the last page took %2 ms")
                     .arg(thousands(model.rowCount()))
                     .arg(lastPageMs, 0, 'f', 1));
            sinceNote.restart();
        }
    }
    if (!stopped.isEmpty()) {
        for (; nextDepth < qsizetype(std::size(Depths)) && Depths[nextDepth] < m_events; ++nextDepth)
            printFigure(QStringLiteral("events: scrolled, page at row %1").arg(thousands(Depths[nextDepth])), {},
                        FirstPageTargetMs, stopped);
    }
    printValue(QStringLiteral("events: rows scrolled"), double(model.rowCount()), QStringLiteral("rows"), std::nullopt,
               QStringLiteral("in %1 s, the last page %2 ms%3")
                   .arg(double(scrolling.elapsed()) / 1000, 0, 'f', 1)
                   .arg(lastPageMs, 0, 'f', 1)
                   .arg(stopped.isEmpty() ? QString() : QStringLiteral("; ") + stopped));
    printMemory(QStringLiteral("scrolling"));
}

// Export on the Dead letters page with no filter: the reader writes every letter to a CSV
// file a batch at a time; the time it takes, and the memory while it runs.
void ConsoleBench::exportDeadLetters()
{
    QTemporaryDir folder;
    const QString path = folder.filePath(QStringLiteral("dead-letters.csv"));
    int written = 0;
    QString error;
    bool finished = false;
    const quint64 token = m_session->exportDeadLetters(DeadLetterFilter(), path);
    const auto end = QObject::connect(m_session.get(), &ui::StoreSession::exportFinished, m_session.get(),
                                      [&](quint64 from, int letters, bool, const QString &why) {
                                          if (from != token)
                                              return;
                                          written = letters;
                                          error = why;
                                          finished = true;
                                      });
    QElapsedTimer clock;
    clock.start();
    double highestMiB = residentMiB();
    QTimer sampler;
    QObject::connect(&sampler, &QTimer::timeout, [&highestMiB] { highestMiB = std::max(highestMiB, residentMiB()); });
    sampler.start(100);
    if (!runUntil([&] { return finished; }, 10 * MinuteMs))
        error = QStringLiteral("not finished after 10 minutes");
    const double seconds = double(clock.elapsed()) / 1000;
    QObject::disconnect(end);
    if (!error.isEmpty())
        m_complete = false;
    printValue(QStringLiteral("dead letters: export all as CSV"), seconds, QStringLiteral("s"), std::nullopt,
               QStringLiteral("%1 letters, %2 MiB written%3")
                   .arg(thousands(written), QString::number(double(QFileInfo(path).size()) / 1048576, 'f', 1),
                        error.isEmpty() ? QString() : QStringLiteral("; ") + error));
    printValue(QStringLiteral("export: highest resident memory"), highestMiB, QStringLiteral("MiB"), MemoryTargetMiB);
}

// "Redrive all matching" with no filter: the reader moves every dead letter back to the
// queue at the rate asked, for a while, then is cancelled. This changes the store.
void ConsoleBench::redriveAllMatching()
{
    int moved = 0;
    QString error;
    bool finished = false;
    // The reader walks the matching letters itself, a batch at a time.
    RedriveOptions options;
    options.matching = DeadLetterFilter();
    options.ceilingPerSecond = m_options.redriveRate;
    options.detail = QStringLiteral("every dead letter (benchmark)");
    options.reason = QStringLiteral("once-console-bench");
    const quint64 token = m_session->redrive(options);
    const auto progress = QObject::connect(m_session.get(), &ui::StoreSession::redriveProgress, m_session.get(),
                                           [&](quint64 from, const RedriveProgress &step) {
                                               if (from == token)
                                                   moved = int(step.moved);
                                           });
    const auto end = QObject::connect(m_session.get(), &ui::StoreSession::redriveFinished, m_session.get(),
                                      [&](quint64 from, const RedriveResult &result) {
                                          if (from != token)
                                              return;
                                          moved = int(result.moved);
                                          error = result.error;
                                          finished = true;
                                      });
    QElapsedTimer clock;
    clock.start();
    double highestMiB = residentMiB();
    QTimer sampler;
    QObject::connect(&sampler, &QTimer::timeout, [&highestMiB] { highestMiB = std::max(highestMiB, residentMiB()); });
    sampler.start(250);
    runUntil([&] { return finished || clock.elapsed() >= m_options.redriveSeconds * 1000LL; }, 10 * MinuteMs);
    const double seconds = double(clock.elapsed()) / 1000;
    const int movedInTime = moved;
    m_session->cancelRedrive(token);
    runUntil([&] { return finished; }, MinuteMs);
    QObject::disconnect(progress);
    QObject::disconnect(end);
    printValue(QStringLiteral("redrive: rate kept"), double(movedInTime) / seconds, QStringLiteral("/s"), std::nullopt,
               QStringLiteral("%1 moved in %2 s at %3/s asked%4")
                   .arg(thousands(movedInTime))
                   .arg(seconds, 0, 'f', 1)
                   .arg(m_options.redriveRate)
                   .arg(error.isEmpty() ? QString() : QStringLiteral("; ") + error));
    printValue(QStringLiteral("redrive: highest resident memory"), highestMiB, QStringLiteral("MiB"), MemoryTargetMiB);
}

} // namespace once::bench
