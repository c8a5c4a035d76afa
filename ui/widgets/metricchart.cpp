#include "widgets/metricchart.h"

#include <QDateTime>
#include <QDateTimeAxis>
#include <QEvent>
#include <QGraphicsSimpleTextItem>
#include <QLineSeries>
#include <QValueAxis>

#include <algorithm>

namespace once::ui {

namespace {
// A flat line at zero still gets a readable scale instead of a collapsed one.
constexpr double MinimumYMax = 4.0;
constexpr int SparsePoints = 30;
} // namespace

MetricChart::MetricChart(const QString &title, Severity lineSeverity, QWidget *parent)
    : QChartView(parent), m_lineSeverity(lineSeverity)
{
    auto *chart = new QChart;
    chart->setAnimationOptions(QChart::NoAnimation);
    chart->legend()->hide();
    chart->setMargins(QMargins(6, 6, 6, 6));
    chart->setBackgroundRoundness(6);
    QFont titleFont = chart->titleFont();
    titleFont.setBold(true);
    chart->setTitleFont(titleFont);
    chart->setTitle(title);

    m_series = new QLineSeries;
    m_series->setMarkerSize(6);
    chart->addSeries(m_series);
    m_x = new QDateTimeAxis;
    m_x->setFormat(QStringLiteral("HH:mm"));
    m_x->setTickCount(6);
    m_y = new QValueAxis;
    m_y->setLabelFormat(QStringLiteral("%g"));
    m_y->setRange(0, MinimumYMax);
    m_y->setTickCount(5);
    chart->addAxis(m_x, Qt::AlignBottom);
    chart->addAxis(m_y, Qt::AlignLeft);
    m_series->attachAxis(m_x);
    m_series->attachAxis(m_y);

    m_emptyText = new QGraphicsSimpleTextItem(tr("No data in this window"), chart);
    connect(chart, &QChart::plotAreaChanged, this, &MetricChart::placeEmptyText);

    setChart(chart);
    setRenderHint(QPainter::Antialiasing);
    setFrameShape(QFrame::NoFrame);
    setMinimumHeight(180);
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    m_x->setRange(QDateTime::fromMSecsSinceEpoch(now - 3600 * 1000), QDateTime::fromMSecsSinceEpoch(now));
    applyColours();
}

void MetricChart::setTickCount(int ticks)
{
    m_x->setTickCount(ticks);
}

void MetricChart::setTitle(const QString &title)
{
    chart()->setTitle(title);
}

QString MetricChart::title() const
{
    return chart()->title();
}

void MetricChart::setPoints(const QList<QPointF> &points, qint64 fromMs, qint64 toMs)
{
    // The bucket still running has its centre a little ahead of now; it belongs at now.
    QList<QPointF> shown = points;
    for (QPointF &point : shown)
        point.setX(std::min(point.x(), double(toMs)));
    m_series->replace(shown);
    // A line needs two points; a few lonely samples show as dots instead of nothing.
    m_series->setPointsVisible(points.size() <= SparsePoints);
    m_x->setRange(QDateTime::fromMSecsSinceEpoch(fromMs), QDateTime::fromMSecsSinceEpoch(toMs));
    double maxY = 0;
    for (const QPointF &point : points)
        maxY = std::max(maxY, point.y());
    m_y->setRange(0, std::max(MinimumYMax, maxY * 1.1));
    m_y->applyNiceNumbers();
    // %g keeps 0.5 steps readable but turns a backlog of millions into 1e+06.
    m_y->setLabelFormat(m_y->max() >= 10 ? QStringLiteral("%.0f") : QStringLiteral("%g"));
    m_emptyText->setVisible(points.isEmpty());
    placeEmptyText();
}

QList<QPointF> MetricChart::points() const
{
    return m_series->points();
}

void MetricChart::changeEvent(QEvent *event)
{
    QChartView::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        applyColours();
}

void MetricChart::placeEmptyText()
{
    const QRectF area = chart()->plotArea();
    const QRectF text = m_emptyText->boundingRect();
    m_emptyText->setPos(area.center() - QPointF(text.width() / 2, text.height() / 2));
}

void MetricChart::applyColours()
{
    // The chart themes bring their own colours; the palette's fit the rest of the window.
    const QPalette pal = palette();
    QChart *chart = this->chart();
    setBackgroundBrush(pal.window());
    chart->setBackgroundBrush(pal.base());
    chart->setBackgroundPen(QPen(pal.color(QPalette::Mid), 1));
    chart->setTitleBrush(pal.text());
    QColor grid = pal.color(QPalette::Mid);
    grid.setAlpha(110);
    for (QAbstractAxis *axis : {static_cast<QAbstractAxis *>(m_x), static_cast<QAbstractAxis *>(m_y)}) {
        axis->setLabelsBrush(pal.text());
        axis->setGridLineColor(grid);
        axis->setLinePenColor(pal.color(QPalette::Mid));
    }
    m_emptyText->setBrush(pal.color(QPalette::PlaceholderText));
    const QColor line = m_lineSeverity == Severity::Normal ? pal.color(QPalette::Highlight)
                                                           : severityTextColor(m_lineSeverity, pal);
    m_series->setPen(QPen(line, 2));
}

} // namespace once::ui
