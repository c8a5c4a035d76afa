#pragma once

#include <QByteArray>
#include <QList>
#include <QString>

#include <utility>

namespace once {

// Observations in fixed buckets, as a Prometheus histogram keeps them. counts holds one
// entry per upper bound plus one for everything above the highest (the +Inf bucket); they
// are per bucket, not cumulative, so that two histograms add up entry by entry.
struct Histogram
{
    QList<double> upperBounds; // ascending
    QList<qint64> counts;      // upperBounds.size() + 1 entries
    double sum = 0;

    static Histogram withBounds(const QList<double> &upperBounds);
    void observe(double value);
    qint64 count() const;
};

using MetricLabels = QList<std::pair<QString, QString>>;

// Writes the Prometheus text exposition format, version 0.0.4: a HELP and a TYPE line per
// metric family, then its samples, label values and help text escaped as the format says.
// Counters are named with their _total suffix (the TYPE line carries it too, as
// promtool expects), units are base units (seconds, not milliseconds).
class Exposition final
{
public:
    enum class Type { Counter, Gauge, Histogram };

    static const QByteArray ContentType;

    // A family with one unlabelled sample.
    void counter(const QString &name, const QString &help, double value);
    void gauge(const QString &name, const QString &help, double value);
    // A family whose samples follow with sample(); every sample of a family must come
    // before the next family starts.
    void family(const QString &name, Type type, const QString &help);
    void sample(const QString &name, const MetricLabels &labels, double value);
    void histogram(const QString &name, const QString &help, const Histogram &histogram);

    QByteArray text() const { return m_text.toUtf8(); }

    static QString escapeLabelValue(const QString &value);
    static QString escapeHelp(const QString &help);
    static QString formatValue(double value);

private:
    QString m_text;
};

} // namespace once
