#pragma once

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QString>

#include <functional>
#include <optional>

namespace once::bench {

// Runs the event loop until done() holds, or timeoutMs pass (false then).
bool runUntil(const std::function<bool()> &done, qint64 timeoutMs);

// The time from start() to the first emission of signal, taken in the slot itself so
// that it does not depend on when the loop gets round to checking; nothing on timeout.
template <typename Sender, typename Signal, typename Start>
std::optional<double> timeUntil(Sender *sender, Signal signal, Start start, qint64 timeoutMs = 600'000)
{
    std::optional<double> elapsedMs;
    QElapsedTimer clock;
    const auto connection = QObject::connect(sender, signal, sender, [&] {
        if (!elapsedMs)
            elapsedMs = double(clock.nsecsElapsed()) / 1e6;
    });
    clock.start();
    start();
    runUntil([&] { return elapsedMs.has_value(); }, timeoutMs);
    QObject::disconnect(connection);
    return elapsedMs;
}

double median(QList<double> values);

// Resident memory now (VmRSS) and at its peak (getrusage), in MiB.
double residentMiB();
double peakResidentMiB();
// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
QString loadAverage();

// One line per figure: what, the median of its runs, every run, the target and whether
// the median meets it. No runs: the figure could not be measured (note says why).
void printFigure(const QString &name, const QList<double> &runsMs, std::optional<double> targetMs,
                 const QString &note = QString());
// A figure in other units (MiB, rows per second), with an optional upper bound.
void printValue(const QString &name, double value, const QString &unit, std::optional<double> atMost = std::nullopt,
                const QString &note = QString());
// The console's resident memory must stay under this whatever the store's size.
inline constexpr double MemoryTargetMiB = 300;
void printMemory(const QString &after);

QString thousands(qint64 value);

} // namespace once::bench
