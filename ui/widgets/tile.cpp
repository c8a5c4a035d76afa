#include "widgets/tile.h"

#include <QEvent>
#include <QLabel>
#include <QPainter>
#include <QVBoxLayout>

namespace once::ui {

Tile::Tile(const QString &caption, QWidget *parent)
    : QFrame(parent), m_caption(new QLabel(caption)), m_value(new QLabel(QStringLiteral("—"))),
      m_subCaption(new QLabel)
{
    m_caption->setObjectName(QStringLiteral("caption"));
    m_value->setObjectName(QStringLiteral("value"));
    m_subCaption->setObjectName(QStringLiteral("subCaption"));
    QFont captionFont = m_caption->font();
    captionFont.setBold(true);
    m_caption->setFont(captionFont);
    QFont valueFont = m_value->font();
    valueFont.setPointSizeF(valueFont.pointSizeF() * 2.0);
    valueFont.setBold(true);
    m_value->setFont(valueFont);
    m_value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_subCaption->setWordWrap(true);
    // Without a fixed height for the context line, tiles in a row grow unevenly as texts change.
    m_subCaption->setMinimumHeight(m_subCaption->fontMetrics().lineSpacing());

    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(12, 10, 12, 10);
    layout->setSpacing(2);
    layout->addWidget(m_caption);
    layout->addWidget(m_value);
    layout->addWidget(m_subCaption);
    layout->addStretch();
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    setMinimumWidth(150);
    applyColours();
}

QString Tile::caption() const
{
    return m_caption->text();
}

QString Tile::value() const
{
    return m_value->text();
}

QString Tile::subCaption() const
{
    return m_subCaption->text();
}

void Tile::setValue(const QString &value, Severity severity)
{
    m_value->setText(value);
    if (severity != m_severity || m_muted) {
        m_severity = severity;
        m_muted = false;
        applyColours();
    }
}

void Tile::setMutedValue(const QString &text)
{
    m_value->setText(text);
    if (!m_muted || m_severity != Severity::Normal) {
        m_severity = Severity::Normal;
        m_muted = true;
        applyColours();
    }
}

void Tile::setSubCaption(const QString &text)
{
    m_subCaption->setText(text);
    m_subCaption->setToolTip(text);
}

void Tile::changeEvent(QEvent *event)
{
    QFrame::changeEvent(event);
    if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange)
        applyColours();
}

void Tile::applyColours()
{
    // Child palettes rather than style sheets, so a theme change reaches the tile through
    // changeEvent and nothing fights the platform style.
    QPalette muted = palette();
    muted.setColor(QPalette::WindowText, palette().color(QPalette::PlaceholderText));
    m_caption->setPalette(muted);
    m_subCaption->setPalette(muted);
    QPalette valuePalette = palette();
    valuePalette.setColor(QPalette::WindowText, m_muted ? palette().color(QPalette::PlaceholderText)
                                                        : severityTextColor(m_severity, palette()));
    m_value->setPalette(valuePalette);
    update();
}

void Tile::paintEvent(QPaintEvent *event)
{
    Q_UNUSED(event)
    QPainter painter(this);
    painter.setRenderHint(QPainter::Antialiasing);
    QColor border = palette().color(QPalette::Mid);
    if (m_severity == Severity::Warning || m_severity == Severity::Alert)
        border = severityTextColor(m_severity, palette());
    painter.setPen(QPen(border, 1));
    painter.setBrush(palette().color(QPalette::Base));
    painter.drawRoundedRect(QRectF(rect()).adjusted(0.5, 0.5, -0.5, -0.5), 6, 6);
}

} // namespace once::ui
