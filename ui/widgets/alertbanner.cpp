#include "widgets/alertbanner.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>

#include <algorithm>

namespace once::ui {

AlertBanner::AlertBanner(QWidget *parent) : QFrame(parent), m_label(new QLabel)
{
    setObjectName(QStringLiteral("alertBanner"));
    m_label->setWordWrap(true);
    m_label->setTextFormat(Qt::PlainText);
    m_label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont font = m_label->font();
    font.setBold(true);
    m_label->setFont(font);
    auto *layout = new QHBoxLayout(this);
    layout->setContentsMargins(12, 8, 12, 8);
    layout->addWidget(m_label);
    hide();
}

void AlertBanner::setAlerts(QList<Alert> alerts)
{
    std::stable_sort(alerts.begin(), alerts.end(),
                     [](const Alert &a, const Alert &b) { return int(a.severity) > int(b.severity); });
    m_alerts = alerts;
    m_severity = alerts.isEmpty() ? Severity::Normal : alerts.constFirst().severity;
    m_label->setText(text());
    applyColours();
    setVisible(!alerts.isEmpty());
}

QString AlertBanner::text() const
{
    QStringList lines;
    for (const Alert &alert : m_alerts)
        lines << alert.text;
    return lines.join(QLatin1Char('\n'));
}

void AlertBanner::changeEvent(QEvent *event)
{
    QFrame::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        applyColours();
}

void AlertBanner::applyColours()
{
    m_colours = bannerColors(m_severity, palette());
    QPalette labelPalette = m_label->palette();
    labelPalette.setColor(QPalette::WindowText, m_colours.text);
    m_label->setPalette(labelPalette);
    update();
}

void AlertBanner::paintEvent(QPaintEvent *event)
{
    Q_UNUSED(event)
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setPen(QPen(m_colours.border, 1));
    painter.setBrush(m_colours.background);
    painter.drawRoundedRect(QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6);
}

} // namespace once::ui
