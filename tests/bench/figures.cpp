#include "figures.h"

#include <QFile>
#include <QLocale>
#include <QTimer>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>

namespace once::bench {

bool runUntil(const std::function<bool()> &done, qint64 timeoutMs)
{
    QElapsedTimer clock;
    clock.start();
    // Wakes the loop now and then, so that a timeout is noticed without any event.
    QTimer wake;
    wake.start(100);
    while (!done()) {
        if (clock.elapsed() > timeoutMs)
            return false;
        QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
    }
    return true;
}

double median(QList<double> values)
{
    if (values.isEmpty())
        return 0;
    std::sort(values.begin(), values.end());
    const qsizetype middle = values.size() / 2;
    return values.size() % 2 ? values.at(middle) : (values.at(middle - 1) + values.at(middle)) / 2;
}

double residentMiB()
{
    QFile status(QStringLiteral("/proc/self/status"));
    if (!status.open(QIODevice::ReadOnly))
        return 0;
    for (const QByteArray &line : status.readAll().split('\n')) {
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').value(0).toDouble() / 1024.0; // kB
    }
    return 0;
}

double peakResidentMiB()
{
    rusage usage = {};
    getrusage(RUSAGE_SELF, &usage);
    return double(usage.ru_maxrss) / 1024.0; // kB on Linux
}

QString loadAverage()
{
    QFile file(QStringLiteral("/proc/loadavg"));
    if (!file.open(QIODevice::ReadOnly))
        return QStringLiteral("unknown");
    const QList<QByteArray> parts = file.readAll().split(' ');
    return QString::fromLatin1(parts.mid(0, 3).join(' '));
}

QString thousands(qint64 value)
{
    QLocale locale(QLocale::English);
    return locale.toString(value);
}

namespace {

QString milliseconds(double ms)
{
    return ms >= 100 ? QString::number(ms, 'f', 0) : QString::number(ms, 'f', 1);
}

void printLine(const QString &name, const QString &value, const QString &target, const QString &verdict,
               const QString &note)
{
    std::printf("%-46s %12s  %-11s %-5s %s\n", qPrintable(name), qPrintable(value), qPrintable(target),
                qPrintable(verdict), qPrintable(note));
    std::fflush(stdout);
}

} // namespace

void printFigure(const QString &name, const QList<double> &runsMs, std::optional<double> targetMs, const QString &note)
{
    const QString target = targetMs ? QStringLiteral("< %1 ms").arg(*targetMs) : QString();
    if (runsMs.isEmpty()) {
        printLine(name, QStringLiteral("—"), target, targetMs ? QStringLiteral("FAIL") : QString(), note);
        return;
    }
    const double value = median(runsMs);
    QStringList runs;
    for (const double run : runsMs)
        runs << milliseconds(run);
    QString detail = runsMs.size() > 1 ? QStringLiteral("(runs %1)").arg(runs.join(QLatin1String(", "))) : QString();
    if (!note.isEmpty())
        detail += (detail.isEmpty() ? QString() : QStringLiteral(" ")) + note;
    printLine(name, milliseconds(value) + QStringLiteral(" ms"), target,
              targetMs ? (value < *targetMs ? QStringLiteral("pass") : QStringLiteral("FAIL")) : QString(), detail);
}

void printValue(const QString &name, double value, const QString &unit, std::optional<double> atMost, const QString &note)
{
    printLine(name, QString::number(value, 'f', value >= 100 ? 0 : 1) + QLatin1Char(' ') + unit,
              atMost ? QStringLiteral("< %1 %2").arg(*atMost).arg(unit) : QString(),
              atMost ? (value < *atMost ? QStringLiteral("pass") : QStringLiteral("FAIL")) : QString(), note);
}

void printMemory(const QString &after)
{
    printValue(QStringLiteral("resident memory after ") + after, residentMiB(), QStringLiteral("MiB"), MemoryTargetMiB,
               QStringLiteral("(peak so far %1 MiB)").arg(peakResidentMiB(), 0, 'f', 0));
}

} // namespace once::bench
