#include "monitoring/exposition.h"

#include <QLocale>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace once {

const QByteArray Exposition::ContentType = QByteArrayLiteral("text/plain; version=0.0.4; charset=utf-8");

Histogram Histogram::withBounds(const QList<double> &upperBounds)
{
    Histogram histogram;
    histogram.upperBounds = upperBounds;
    histogram.counts.fill(0, upperBounds.size() + 1);
    return histogram;
}

void Histogram::observe(double value)
{
    const auto bucket = std::lower_bound(upperBounds.cbegin(), upperBounds.cend(), value) - upperBounds.cbegin();
    ++counts[bucket];
    sum += value;
}

qint64 Histogram::count() const
{
    return std::accumulate(counts.cbegin(), counts.cend(), qint64(0));
}

void Exposition::counter(const QString &name, const QString &help, double value)
{
    family(name, Type::Counter, help);
    sample(name, {}, value);
}

void Exposition::gauge(const QString &name, const QString &help, double value)
{
    family(name, Type::Gauge, help);
    sample(name, {}, value);
}

void Exposition::family(const QString &name, Type type, const QString &help)
{
    Q_ASSERT_X(type != Type::Counter || name.endsWith(QLatin1String("_total")), "Exposition::family",
               "a counter's name ends in _total");
    const auto typeName = [type] {
        switch (type) {
        case Type::Counter:
            return QLatin1String("counter");
        case Type::Gauge:
            return QLatin1String("gauge");
        case Type::Histogram:
            return QLatin1String("histogram");
        }
        return QLatin1String("untyped");
    };
    m_text += QLatin1String("# HELP ") + name + QLatin1Char(' ') + escapeHelp(help) + QLatin1Char('\n');
    m_text += QLatin1String("# TYPE ") + name + QLatin1Char(' ') + typeName() + QLatin1Char('\n');
}

void Exposition::sample(const QString &name, const MetricLabels &labels, double value)
{
    m_text += name;
    if (!labels.isEmpty()) {
        m_text += QLatin1Char('{');
        for (qsizetype i = 0; i < labels.size(); ++i) {
            if (i)
                m_text += QLatin1Char(',');
            m_text += labels.at(i).first + QLatin1String("=\"") + escapeLabelValue(labels.at(i).second)
                      + QLatin1Char('"');
        }
        m_text += QLatin1Char('}');
    }
    m_text += QLatin1Char(' ') + formatValue(value) + QLatin1Char('\n');
}

void Exposition::histogram(const QString &name, const QString &help, const Histogram &histogram)
{
    family(name, Type::Histogram, help);
    const QString bucket = name + QLatin1String("_bucket");
    qint64 cumulative = 0;
    for (qsizetype i = 0; i < histogram.upperBounds.size(); ++i) {
        cumulative += histogram.counts.value(i);
        sample(bucket, {{QStringLiteral("le"), formatValue(histogram.upperBounds.at(i))}}, double(cumulative));
    }
    const qint64 count = histogram.count();
    sample(bucket, {{QStringLiteral("le"), QStringLiteral("+Inf")}}, double(count));
    sample(name + QLatin1String("_sum"), {}, histogram.sum);
    sample(name + QLatin1String("_count"), {}, double(count));
}

QString Exposition::escapeLabelValue(const QString &value)
{
    QString escaped;
    escaped.reserve(value.size());
    for (const QChar c : value) {
        if (c == QLatin1Char('\\'))
            escaped += QLatin1String("\\\\");
        else if (c == QLatin1Char('"'))
            escaped += QLatin1String("\\\"");
        else if (c == QLatin1Char('\n'))
            escaped += QLatin1String("\\n");
        else
            escaped += c;
    }
    return escaped;
}

QString Exposition::escapeHelp(const QString &help)
{
    QString escaped = help;
    escaped.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    escaped.replace(QLatin1Char('\n'), QLatin1String("\\n"));
    return escaped;
}

QString Exposition::formatValue(double value)
{
    if (std::isnan(value))
        return QStringLiteral("NaN");
    if (std::isinf(value))
        return value > 0 ? QStringLiteral("+Inf") : QStringLiteral("-Inf");
    // Counts print as integers at any size a double holds exactly (1234567, not 1.234567e+06).
    if (value == std::trunc(value) && std::abs(value) < 9007199254740992.0)
        return QString::number(qint64(value));
    // The shortest text that reads back as the same double: 0.1, not 0.10000000000000001.
    return QString::number(value, 'g', QLocale::FloatingPointShortest);
}

} // namespace once
