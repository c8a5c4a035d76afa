#pragma once

#include "display/statuscolors.h"

#include <QChartView>

class QDateTimeAxis;
class QGraphicsSimpleTextItem;
class QLineSeries;
class QValueAxis;

namespace once::ui {

// One time series over a time window: a line chart with a clock on the x axis, without
// animations (it is redrawn every refresh), in the colours of the current palette.
class MetricChart final : public QChartView
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MetricChart)

public:
    explicit MetricChart(const QString &title, Severity lineSeverity = Severity::Normal,
                         QWidget *parent = nullptr);

    void setTitle(const QString &title);
    // Ticks on the time axis, ends included; pick a count that makes round intervals.
    void setTickCount(int ticks);
    QString title() const;
    // x is milliseconds since the epoch; the x axis shows [fromMs, toMs] whatever the points.
    void setPoints(const QList<QPointF> &points, qint64 fromMs, qint64 toMs);
    QList<QPointF> points() const;

protected:
    void changeEvent(QEvent *event) override;

private:
    void applyColours();
    void placeEmptyText();

    QLineSeries *m_series = nullptr;
    QDateTimeAxis *m_x = nullptr;
    QValueAxis *m_y = nullptr;
    QGraphicsSimpleTextItem *m_emptyText = nullptr;
    Severity m_lineSeverity = Severity::Normal;
};

} // namespace once::ui
