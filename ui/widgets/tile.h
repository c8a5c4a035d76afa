#pragma once

#include "display/statuscolors.h"

#include <QFrame>

class QLabel;

namespace once::ui {

// One number on a dashboard: a caption, the value in large type, and a line of context
// under it. The value takes the colour of its severity.
class Tile final : public QFrame
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(Tile)

public:
    explicit Tile(const QString &caption, QWidget *parent = nullptr);

    QString caption() const;
    QString value() const;
    QString subCaption() const;
    Severity severity() const { return m_severity; }

    void setValue(const QString &value, Severity severity = Severity::Normal);
    // A value nobody could measure ("not available"): muted, so it does not read as a number.
    void setMutedValue(const QString &text);
    bool isMuted() const { return m_muted; }
    void setSubCaption(const QString &text);

protected:
    void changeEvent(QEvent *event) override;
    void paintEvent(QPaintEvent *event) override;

private:
    void applyColours();

    QLabel *m_caption = nullptr;
    QLabel *m_value = nullptr;
    QLabel *m_subCaption = nullptr;
    Severity m_severity = Severity::Normal;
    bool m_muted = false;
};

} // namespace once::ui
